"""User-facing errors: the CLI prints their message on one line and exits non-zero, no stack trace."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user asked for or gave us (bad path, bad format, bad option)."""


class DataFormatError(UserError):
    """Input data that does not follow its declared format; names the file and line or element."""

    def __init__(self, path: str, where: str, problem: str) -> None:
        self.path = path
        self.where = where
        self.problem = problem
        super().__init__(f"{path}:{where}: {problem}")
