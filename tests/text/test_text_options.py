"""TextOptions: the contract's defaults, a typo is an error naming it, and a JSON round trip."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text import TextOptions


def test_defaults_follow_the_contract() -> None:
    opts = TextOptions()
    assert opts.model_dump() == {
        "html": True, "code": "keep", "links": True, "lowercase": True, "body_words": 100,
        "use_body": True, "stopwords": False, "stem": False, "numbers": False, "dates": False,
        "arabic": False,
    }


def test_json_round_trip_keeps_every_option() -> None:
    opts = TextOptions(code="prefix", body_words=None, stem=True, arabic=True, dates=True)
    text = json.dumps({"preprocessing": opts.model_dump()})
    assert TextOptions.model_validate(json.loads(text)["preprocessing"]) == opts
    assert TextOptions.model_validate_json(opts.model_dump_json()) == opts


def test_unknown_option_is_an_error_naming_it() -> None:
    with pytest.raises(ValidationError, match="lowercse"):
        TextOptions(lowercse=False)  # type: ignore[call-arg]
    with pytest.raises(UserError, match=r"config.json: unknown option 'stemming' \(known: html, code"):
        TextOptions.from_mapping({"stem": True, "stemming": True}, source="config.json")


@pytest.mark.parametrize(
    ("data", "named"),
    [({"code": "delete"}, "'code'"), ({"stem": "yes"}, "'stem'"), ({"body_words": -1}, "'body_words'"),
     ({"body_words": 10.5}, "'body_words'")],
)
def test_bad_values_are_errors_naming_the_option(data: dict, named: str) -> None:
    with pytest.raises(UserError, match=named):
        TextOptions.from_mapping(data)


def test_options_are_frozen_and_hashable() -> None:
    opts = TextOptions()
    with pytest.raises(ValidationError):
        opts.stem = True  # type: ignore[misc]
    assert hash(opts) == hash(TextOptions())
