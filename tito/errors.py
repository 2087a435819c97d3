"""The one error type tito turns into a one-line message with a hint."""

import importlib.util


class TitoError(Exception):
    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code


# PyTorch's CPU build: on Linux a plain `pip install torch` fetches the CUDA build (gigabytes)
TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def require_torch(what: str) -> None:
    """A TitoError with the install command when PyTorch (the benchmark only) is absent.

    The module tests never need it: PyTorch's answers are committed beside them."""
    if importlib.util.find_spec("torch") is None:
        raise TitoError(
            f"{what} PyTorch, which is not installed",
            hint=f"{TORCH_CPU} (the CPU build; tinytorch itself never uses torch)",
        )
