"""The exact command that resumes an ``es index`` run, and the end of such a run: its report, that
command and its error line, whatever stopped it (a refused question, the sidecar or the cluster gone,
Ctrl-C), so the user never has to reconstruct what was stored or how to go on."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click
from click.core import ParameterSource

#: Values never echoed: the command names the environment variable instead.
SECRETS = {"token": "ESRERANK_TOKEN", "es_api_key": "ESRERANK_ES_API_KEY",
           "es_password": "ESRERANK_ES_PASSWORD"}


def resume_command(ctx: click.Context) -> tuple[str, list[str]]:
    """The command of ``ctx`` as typed (its arguments, then each option given on the command line) with
    ``--resume``; and the environment variables it reads in place of a secret given on the command line
    (a token or password in a printed command would end up in logs)."""
    words, secrets = [shlex.quote(w) for w in ctx.command_path.split()], []
    for param in ctx.command.params:
        if param.name is None or param.name == "resume":
            continue
        value = ctx.params.get(param.name)
        if isinstance(param, click.Argument):
            words += [shlex.quote(str(v)) for v in (value if isinstance(value, tuple) else (value,))]
            continue
        if ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
            continue
        flag = max(param.opts, key=len)
        if getattr(param, "is_flag", False):
            words += [flag] if value else []
        elif param.name in SECRETS:
            words += [flag, f'"${SECRETS[param.name]}"']
            secrets.append(SECRETS[param.name])
        else:
            words += [flag, shlex.quote(str(value))]
    return " ".join([*words, "--resume"]), secrets


def finish_index_run(run: Any) -> None:
    """Print an ``es index`` run's report (stdout) and, when it did not store everything, the command that
    resumes it (stdout) and its one-line error (stderr); exit 1 then, or 130 after Ctrl-C."""
    for line in run.report.lines():
        click.echo(line)
    if not run.error:
        return
    command, secrets = resume_command(click.get_current_context())
    click.echo(f"resume with: {command}")
    if secrets:
        click.echo(f"(set {' and '.join(secrets)}: the command does not repeat what you typed for it)")
    click.echo(f"error: {run.error}", err=True)
    sys.exit(130 if run.interrupted else 1)
