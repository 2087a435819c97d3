"""The rich consoles every command prints through: output to stdout, errors and hints to stderr."""

from rich.console import Console
from rich.markup import escape
from rich.theme import Theme

from tito.inert import terminal_text

THEME = Theme({"ok": "green", "bad": "bold red", "note": "dim", "name": "cyan"})
console = Console(theme=THEME, highlight=False, soft_wrap=True)  # commands stay copyable
errors = Console(theme=THEME, highlight=False, soft_wrap=True, stderr=True)


def safe(text: object) -> str:
    """Text from outside tito (a path, a test id, a name) made inert inside a markup line: rich
    would take `[shape0-gelu]` for a tag and drop it, and a terminal would act on escapes."""
    return escape(terminal_text(str(text)))


def ok(message: str) -> None:
    console.print(f"[ok]ok[/ok] {safe(message)}", soft_wrap=True)


def fail(message: str, hint: str | None = None) -> None:
    # soft_wrap: an error stays one line however narrow the terminal (or a test runner) is;
    # escape: messages are plain text, and paths or commands like ".[test]" are not markup
    # terminal_text: a message may carry a student's text (an exception, a folder name), and
    # no escape sequence of theirs reaches the terminal
    errors.print(f"[bad]error:[/bad] {safe(message)}", soft_wrap=True)
    if hint:
        errors.print(f"[note]hint:[/note] {safe(hint)}", soft_wrap=True)
