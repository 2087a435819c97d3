"""The milestones' own error: one message and a hint, which a caller (tito's CLI) prints as is."""

from __future__ import annotations


class MilestoneError(Exception):
    """A milestone cannot go on: `message` names the problem, `hint` the fix.

    `exit_code` is what a command line should exit with: 1, or 130 after Ctrl-C.
    """

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
