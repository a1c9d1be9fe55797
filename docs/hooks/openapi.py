"""MkDocs hook: the sidecar API page is rendered from ``openapi_document()`` at build time.

The page holds a ``<!-- openapi -->`` marker; this hook replaces it with one section per endpoint and
one table per schema, and adds the raw document to the site as ``openapi.json``. Generated, not copied, so
the page cannot drift from the pydantic models that validate the sidecar's requests.
"""

from __future__ import annotations

import json
from typing import Any

MARKER = "<!-- openapi -->"
_REF = "#/components/schemas/"


def _document() -> dict[str, Any]:
    from es_plugin_bridge.serving.openapi import openapi_document

    return openapi_document()


def _type(schema: dict[str, Any]) -> str:
    """A short, readable type: ``string``, ``[number]``, ``RerankResult``, ``string | null``."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(_REF)
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " \\| ".join(_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"[{_type(schema.get('items', {}))}]"
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict):
        return f"{{string: {_type(extra)}}}"
    return str(kind)


def _limits(schema: dict[str, Any]) -> str:
    found = []
    for key in ("minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum"):
        for part in [schema, *schema.get("anyOf", [])]:
            if key in part:
                found.append(f"{key} {part[key]}")
    return ", ".join(dict.fromkeys(found))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _schema_table(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]).replace("``", "`"), ""]
    props = schema.get("properties", {})
    if not props:
        return [*lines, f"Type: {_type(schema)}", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | default | notes |", "| --- | --- | --- | --- | --- |"]
    for field, spec in props.items():
        default = json.dumps(spec["default"]) if "default" in spec else ""
        notes = "; ".join(x for x in (spec.get("description", ""), _limits(spec)) if x)
        lines.append(f"| `{field}` | {_type(spec)} | {'yes' if field in required else ''} | "
                     f"{_cell(default)} | {_cell(notes)} |")
    if schema.get("additionalProperties") is False:
        lines += ["", "Unknown fields are refused (400)."]
    return [*lines, ""]


def _body_type(body: dict[str, Any]) -> str:
    schema = body.get("content", {}).get("application/json", {}).get("schema", {})
    return _type(schema) if schema else "—"


def render(doc: dict[str, Any]) -> str:
    """The document as Markdown: endpoints (parameters, body, answers), then every schema."""
    lines = [f"OpenAPI {doc['openapi']}, *{doc['info']['title']}* version {doc['info']['version']}. "
             "The same document is served at `GET /openapi.json` and is [here](openapi.json).", "",
             "## Endpoints", ""]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            lines += [f"### `{method.upper()} {path}`", ""]
            if op.get("summary"):
                lines += [f"**{op['summary']}**", ""]
            if op.get("description"):
                lines += [op["description"], ""]
            if op.get("security") == []:
                lines += ["No bearer token needed.", ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| query parameter | type | description |", "| --- | --- | --- |"]
                lines += [f"| `{p['name']}` | {_type(p.get('schema', {}))} | "
                          f"{_cell(p.get('description', ''))} |" for p in params]
                lines.append("")
            if "requestBody" in op:
                lines += [f"Request body: {_body_type(op['requestBody'])}", ""]
            answers = op.get("responses", {})
            if answers:
                lines += ["| status | meaning | body |", "| --- | --- | --- |"]
                lines += [f"| {code} | {_cell(a.get('description', ''))} | {_body_type(a)} |"
                          for code, a in answers.items()]
                lines.append("")
    lines += ["## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        lines += _schema_table(name, schema)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(_document()))


def on_files(files: Any, config: Any) -> Any:
    """``openapi.json`` beside the pages, as a generated file (so the page can link to it)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "openapi.json",
                                content=json.dumps(_document(), indent=2, ensure_ascii=False) + "\n"))
    return files
