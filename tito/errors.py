"""The one error type tito turns into a one-line message with a hint."""

import importlib.util


class TitoError(Exception):
    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code


def require_torch(what: str) -> None:
    """A TitoError with the install command when PyTorch (tests, benchmark only) is absent."""
    if importlib.util.find_spec("torch") is None:
        raise TitoError(
            f"{what} PyTorch, which is not installed",
            hint='pip install -e ".[test]" (the CPU build of torch; tinytorch never uses it)',
        )
