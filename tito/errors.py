"""The one error type tito turns into a one-line message with a hint."""


class TitoError(Exception):
    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
