"""The preprocessing options: one flag per step, stored with a model so serving cleans text the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from es_plugin_bridge.errors import UserError


class TextOptions(BaseModel):
    """Which cleaning steps run, in the order :class:`~es_plugin_bridge.text.Preprocessor` applies them.

    ``extra="forbid"`` makes a misspelt option an error naming it instead of a silently ignored key;
    ``strict`` refuses coercions such as ``"yes"`` for a boolean; ``frozen`` keeps a model's stored
    options from drifting after it is built.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    html: bool = Field(True, description="parse tags and entities; False: plain text, entities still decoded")
    code: Literal["keep", "remove", "prefix"] = Field(
        "keep", description="<pre>/<code> content: keep it, remove it, or keep it after a __code__ token"
    )
    links: bool = Field(True, description="replace <a href> links and bare URLs by one __url__ token")
    lowercase: bool = Field(True, description="lowercase the text before tokenising")
    body_words: int | None = Field(
        100, ge=0, description="keep the body's first N tokens (counted after every other step); None: all"
    )
    use_body: bool = Field(True, description="False: a question is its title only")
    stopwords: bool = Field(False, description="drop English stop words (and Arabic ones when arabic=True)")
    stem: bool = Field(
        False, description="Snowball stemming (English; Arabic-script words too when arabic=True)"
    )
    numbers: bool = Field(False, description="replace every number token (12, 3.5, 1,000, 12.04) by __num__")
    dates: bool = Field(
        False, description="replace dates (2015-03-12, 12/03/2015, 12 March 2015, March 12) by __date__"
    )
    arabic: bool = Field(False, description="Arabic orthographic normalisation, stop words and stemming")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "text options") -> TextOptions:
        """Validate options read from a file or the command line; raise a UserError naming each bad option."""
        try:
            return cls.model_validate(dict(data))
        except ValidationError as err:
            problems = []
            for item in err.errors():
                name = ".".join(str(part) for part in item["loc"]) or "(options)"
                if item["type"] == "extra_forbidden":
                    problems.append(f"unknown option {name!r} (known: {', '.join(cls.model_fields)})")
                else:
                    problems.append(f"option {name!r}: {item['msg']} (got {item.get('input')!r})")
            raise UserError(f"{source}: " + "; ".join(problems)) from None
