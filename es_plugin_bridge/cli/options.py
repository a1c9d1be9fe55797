"""Options several subcommands share, declared once so that they read and behave the same everywhere."""

from __future__ import annotations

import click

seed_option = click.option("--seed", default=1, show_default=True, type=int)
skip_bad_option = click.option(
    "--skip-bad", is_flag=True, help="Skip malformed records (counted) instead of stopping at the first."
)
title_only_option = click.option("--title-only", is_flag=True, help="Ignore question bodies.")
