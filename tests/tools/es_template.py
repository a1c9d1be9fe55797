"""Elasticsearch's filling of a ``custom`` inference endpoint's templates, restated in Python for tests.

Restated from Elasticsearch 9.x's source (``x-pack/plugin/inference/src/main/java/org/elasticsearch/
xpack/inference/``):

- ``services/custom/request/CustomRequest.java``: the ``request`` template is filled from the *JSON*
  parameters — ``query`` as ``toJson(query)`` (a quoted JSON string), ``input`` as ``toJson(list)``
  (a JSON array of strings; only the first string for ``completion``), and every secret and task
  parameter as JSON too; ``url``, query parameters and headers from the *string* parameters (the
  secrets and task parameters as they are). Each template goes through its own
  ``ValidatingSubstitutor`` with prefix ``${`` and suffix ``}``.
- ``common/ValidatingSubstitutor.java``: commons-text's ``StringSubstitutor.replace``, then an
  ``IllegalStateException`` ("Found placeholder [...] in field [...] after replacement call") if the
  result still matches ``\\$\\{.*?\\}`` (``.`` does not match a line break).
- commons-text ``StringSubstitutor`` (1.x) defaults: escape character ``$`` (``$${x}`` is the literal
  ``${x}``, escape removed), value delimiter ``:-`` (``${x:-d}`` is ``d`` when ``x`` is not a
  parameter), no substitution inside variable names, **substitution inside the values it inserts**
  (a value holding ``${api_key}`` gets the secret; a value holding ``${input}`` inserts the input
  into itself: "Infinite loop in property interpolation"), unknown variables left as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

PREFIX, SUFFIX, ESCAPE, DELIMITER = "${", "}", "$", ":-"
LEFTOVER = re.compile(r"\$\{.*?\}")


class TemplateError(Exception):
    """Elasticsearch would refuse the request (leftover placeholder or cyclic substitution)."""


def substitute(text: str, params: Mapping[str, str], _prior: tuple[str, ...] = ()) -> str:
    """commons-text ``StringSubstitutor.replace`` with its defaults (see the module docstring)."""
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if not text.startswith(PREFIX, pos):
            out.append(text[pos])
            pos += 1
            continue
        if out and out[-1] == ESCAPE:  # "$${": drop the escape, keep "${" as text, scan on after it
            out[-1] = PREFIX
            pos += len(PREFIX)
            continue
        end = text.find(SUFFIX, pos + len(PREFIX))
        if end < 0:
            out.append(text[pos:])
            break
        expr = text[pos + len(PREFIX) : end]
        name, default = (expr.split(DELIMITER, 1) + [None])[:2] if DELIMITER in expr else (expr, None)
        if name in _prior:
            raise TemplateError(f"Infinite loop in property interpolation of {PREFIX}{name}{SUFFIX}")
        value = params.get(name, default)
        if value is None:
            out.append(text[pos : end + 1])
        else:
            out.append(substitute(value, params, (*_prior, name)))
        pos = end + 1
    return "".join(out)


def validating_replace(template: str, params: Mapping[str, str], field: str) -> str:
    """``ValidatingSubstitutor.replace``: substitute, then refuse any leftover ``${...}``."""
    filled = substitute(template, params)
    match = LEFTOVER.search(filled)
    if match:
        raise TemplateError(f"Found placeholder [{match.group()}] in field [{field}] after replacement call")
    return filled


def to_json(value: object) -> str:
    """``JsonUtils.toJson``: XContent's JSON (Jackson): non-ASCII kept, ``$`` and braces as they are."""
    return json.dumps(value, ensure_ascii=False)


def fill_request(
    service_settings: Mapping[str, object], query: str | None, inputs: Sequence[str]
) -> tuple[str, dict[str, str]]:
    """The body and headers Elasticsearch sends for one call of the endpoint (``CustomRequest``)."""
    secrets = dict(service_settings.get("secret_parameters") or {})  # type: ignore[call-overload]
    json_params = {key: to_json(value) for key, value in secrets.items()}
    if query is not None:
        json_params["query"] = to_json(query)
    json_params["input"] = to_json(list(inputs))
    body = validating_replace(str(service_settings["request"]), json_params, "request")
    headers = {
        key: validating_replace(str(value), {k: str(v) for k, v in secrets.items()}, f"header.{key}")
        for key, value in dict(service_settings.get("headers") or {}).items()  # type: ignore[call-overload]
    }
    return body, headers


def extract(data: object, path: str) -> object:
    """``MapPathExtractor.extract`` (``common/MapPathExtractor.java``): ``$`` then ``.field`` and ``[*]``
    steps; unlike JSONPath, ``[*]`` keeps one list per element (no flattening); a missing field or a
    step on the wrong type raises."""
    if not path.startswith("$"):
        raise ValueError(f"Path [{path}] must start with a dollar sign ($)")
    rest = path[1:]

    def navigate(node: object, remaining: str) -> object:
        if node is None or not remaining:
            return node
        dot = re.match(r"^\.([^.\[]+)(.*)$", remaining, re.S)
        if dot:
            if not isinstance(node, dict):
                raise ValueError(f"Current path [{remaining}] matched the dot field pattern but the current "
                                 "object is not a map")
            if node.get(dot.group(1)) is None:
                raise ValueError(f"Unable to find field [{dot.group(1)}] in map")
            return navigate(node[dot.group(1)], dot.group(2))
        star = re.match(r"^\[\*\](.*)$", remaining, re.S)
        if star:
            if not isinstance(node, list):
                raise ValueError(f"Current path [{remaining}] matched the array field pattern but the "
                                 "current object is not a list")
            return [r for r in (navigate(item, star.group(1)) for item in node) if r is not None]
        raise ValueError(f"Invalid path received [{remaining}], unable to extract a field name.")

    return navigate(data, rest)


def parse_text_embeddings(answer: dict, json_parser: dict) -> list[list[float]]:
    """``TextEmbeddingResponseParser`` (float): one list of numbers per input, each as Java float."""
    out = []
    for entry in extract(answer, json_parser["text_embeddings"]):  # type: ignore[union-attr]
        if not isinstance(entry, list) or not all(isinstance(x, (int, float)) for x in entry):
            raise ValueError("Failed to parse text embedding entry: not a list of numbers")
        out.append([float(x) for x in entry])
    return out


def parse_sparse_embeddings(answer: dict, json_parser: dict) -> list[dict[str, float]]:
    """``SparseEmbeddingResponseParser``: token and weight lists of equal size per input; tokens as
    ``toString()``, weights as floats."""
    tokens = extract(answer, json_parser["token_path"])
    weights = extract(answer, json_parser["weight_path"])
    if not isinstance(tokens, list) or not isinstance(weights, list) or len(tokens) != len(weights):
        raise ValueError("The extracted tokens list and weights list must be lists of equal size")
    out = []
    for toks, ws in zip(tokens, weights, strict=True):
        if len(toks) != len(ws):
            raise ValueError("The list sizes must be equal.")
        out.append({str(t): float(w) for t, w in zip(toks, ws, strict=True)})
    return out
