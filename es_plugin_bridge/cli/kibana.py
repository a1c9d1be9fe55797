"""``esrerank kibana``: the ranking-comparison dashboard in Kibana.

  esrerank kibana import --kibana-url URL [--api-key KEY | --username U --password P] [--ca-certs PEM]
  esrerank kibana ndjson [--out FILE]        (the same objects as a file, for Kibana's UI import)
"""

from __future__ import annotations

from pathlib import Path

import click

from es_plugin_bridge.errors import UserError


@click.group("kibana", context_settings={"help_option_names": ["-h", "--help"]})
def kibana_command() -> None:
    """Kibana dashboard of the per-query results index (ranking comparisons)."""


@kibana_command.command("import")
@click.option("--kibana-url", envvar="ESRERANK_KIBANA_URL", default="http://localhost:5601",
              show_default=True, help="Kibana's base URL (or ESRERANK_KIBANA_URL).")
@click.option("--api-key", envvar="ESRERANK_KIBANA_API_KEY", default=None,
              help="Encoded API key (or ESRERANK_KIBANA_API_KEY).")
@click.option("--username", envvar="ESRERANK_KIBANA_USERNAME", default=None, help="Basic-auth user.")
@click.option("--password", envvar="ESRERANK_KIBANA_PASSWORD", default=None,
              help="Basic-auth password (better: ESRERANK_KIBANA_PASSWORD).")
@click.option("--ca-certs", type=click.Path(path_type=Path, dir_okay=False),
              envvar="ESRERANK_KIBANA_CA_CERTS", default=None,
              help="PEM file of the CA that signed Kibana's certificate.")
@click.option("--space", default=None, help="Kibana space id (default: the default space).")
@click.option("--index", "index", default=None,
              help="Results index the data view reads (default: ESRERANK_RESULTS_INDEX or esrerank-runs).")
@click.option("--file", "ndjson_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="Import this NDJSON instead of the built-in dashboard.")
@click.option("--wait", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for Kibana to become available first.")
@click.option("--no-overwrite", is_flag=True,
              help="Refuse to replace existing objects (conflicts are errors).")
def import_command(kibana_url: str, api_key: str | None, username: str | None, password: str | None,
                   ca_certs: Path | None, space: str | None, index: str | None, ndjson_file: Path | None,
                   wait: float, no_overwrite: bool) -> None:
    """Import the dashboard, its Lens panels and the data view; say what was created or replaced."""
    from es_plugin_bridge.kibana.client import KibanaAuth, KibanaClient
    from es_plugin_bridge.kibana.saved_objects import (
        DASHBOARD_ID,
        check_saved_objects,
        parse_ndjson,
        saved_objects,
        to_ndjson,
    )

    if ndjson_file is not None:
        if index is not None:
            raise UserError("--index applies to the built-in dashboard, not to --file")
        text = ndjson_file.read_text(encoding="utf-8")
        try:
            objects = parse_ndjson(text)
        except ValueError as exc:
            raise UserError(f"--file {ndjson_file}: {exc}") from None
        if not objects:
            raise UserError(f"--file {ndjson_file}: no saved object in the file")
    else:
        objects = saved_objects(index)
        problems = check_saved_objects(objects)
        if problems:  # a bug, not a user mistake; say it before Kibana half-imports the set
            raise RuntimeError("; ".join(problems))
        text = to_ndjson(objects)
    client = KibanaClient(kibana_url, KibanaAuth(api_key, username, password, ca_certs), space=space)
    if wait:
        client.wait_available(wait)
    outcome = client.import_objects(text, overwrite=not no_overwrite)
    for verb, entries in (("created", outcome.created), ("replaced", outcome.replaced)):
        for kind, object_id, title in entries:
            click.echo(f"{verb} {kind} {object_id}" + (f" ({title})" if title else ""))
    if outcome.refused:
        raise UserError(f"Kibana refused {len(outcome.refused)} of {len(objects)} objects: "
                        + "; ".join(outcome.refused))
    if any(o["type"] == "dashboard" and o["id"] == DASHBOARD_ID for o in objects):
        prefix = f"{client.url}/s/{space}" if space else client.url
        click.echo(f"open {prefix}/app/dashboards#/view/{DASHBOARD_ID}")


@kibana_command.command("ndjson")
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write here (default: stdout).")
@click.option("--index", "index", default=None, help="Results index the data view reads.")
def ndjson_command(out: Path | None, index: str | None) -> None:
    """Print (or write) the saved objects as NDJSON, for Stack Management → Saved objects → Import."""
    from es_plugin_bridge.kibana.saved_objects import saved_objects, to_ndjson

    text = to_ndjson(saved_objects(index))
    if out is None:
        click.echo(text, nl=False)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}", err=True)
