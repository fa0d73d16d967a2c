"""The failures a user acts on. Library code raises them; the command line prints each as
`iostack: error: <message>` and exits with its code (iostack.cli.main, the one place).

Exit codes: 2, the command refused to start (bad input, something missing, nothing done);
1, something it ran failed. Other exceptions are bugs and keep their traceback."""
from __future__ import annotations


class IostackError(Exception):
    #: the command's exit status when this ends it
    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class Failed(IostackError):
    """Something that ran failed (exit status 1)."""

    exit_code = 1
