"""The single rich console every command prints through."""

from rich.console import Console
from rich.markup import escape
from rich.theme import Theme

console = Console(
    theme=Theme({"ok": "green", "bad": "bold red", "note": "dim", "name": "cyan"}),
    highlight=False,
)


def ok(message: str) -> None:
    console.print(f"[ok]ok[/ok] {escape(message)}", soft_wrap=True)


def fail(message: str, hint: str | None = None) -> None:
    # soft_wrap: an error stays one line however narrow the terminal (or a test runner) is;
    # escape: messages are plain text, and paths or commands like ".[test]" are not markup
    console.print(f"[bad]error:[/bad] {escape(message)}", soft_wrap=True)
    if hint:
        console.print(f"[note]hint:[/note] {escape(hint)}", soft_wrap=True)
