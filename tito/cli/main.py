"""The tito command: one Typer app, one command group per file, one error handler."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from typer.core import TyperGroup

from tito import __version__
from tito.cli import benchmark, diagnose, grade, milestone, model, module, olympics, test
from tito.cli.console import console, fail
from tito.errors import TitoError


def debug_enabled() -> bool:
    return os.environ.get("TITO_DEBUG", "") not in ("", "0")


# What typer reports itself: exits, aborts and click's errors (usage errors and the like). Recent
# typer ships its own copy of click, so click's base class is taken from typer, not imported.
CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
TYPER_OWN = (typer.Exit, typer.Abort, CLICK_ERROR)


def _flags_take_no_value() -> None:
    """Show a flag bare (`--quick`), not as `--quick <bool>`, which reads as an option taking a
    value (`--quick true` then fails). Typer 0.29 prints every flag with `<bool>`; earlier
    versions print none, and this keeps it so."""
    option = getattr(typer.core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if shown is None or getattr(shown, "tito_flags_bare", False):
        return

    def display_type_rich(self, ctx):
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich.tito_flags_bare = True
    option.display_type_rich = display_type_rich


_flags_take_no_value()


class HandledGroup(TyperGroup):
    """Turns every error into one line with a hint; --debug or TITO_DEBUG=1 shows the traceback."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        # --debug is accepted anywhere before a `--`, as in `tito grade generate 6 --debug`
        if ctx.parent is None:
            end = args.index("--") if "--" in args else len(args)
            if "--debug" in args[:end]:
                os.environ["TITO_DEBUG"] = "1"
                args = [a for a in args[:end] if a != "--debug"] + args[end:]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except (*TYPER_OWN, BrokenPipeError):
            raise  # a closed pipe (`tito grade --help | head`): click's main exits quietly
        except TitoError as err:
            if debug_enabled():
                raise
            fail(err.message, err.hint)
            raise typer.Exit(err.exit_code) from None
        except KeyboardInterrupt:
            fail("interrupted; nothing was half-written (each change is all or nothing)")
            raise typer.Exit(130) from None
        except Exception as err:  # noqa: BLE001 - the last line of defence for users
            if debug_enabled():
                raise
            if isinstance(err, OSError) and err.filename is not None:
                fail(
                    f"{err.strerror or type(err).__name__}: {err.filename}",
                    "check that this path exists and that you may write there",
                )
                raise typer.Exit(1) from None
            fail(f"{type(err).__name__}: {err}", "rerun with `tito --debug ...` for the traceback")
            raise typer.Exit(1) from None


app = typer.Typer(
    cls=HandledGroup,
    help="Build tinytorch module by module, test it, and train a GPT with it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(module.app, name="module")
app.command("test")(test.test)
app.command("diagnose")(diagnose.diagnose)
app.add_typer(milestone.app, name="milestone")
app.add_typer(grade.app, name="grade")
app.add_typer(benchmark.app, name="benchmark")
app.add_typer(model.app, name="model")
app.add_typer(olympics.app, name="olympics")


def _version(value: bool) -> None:
    if value:
        console.print(f"tito {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show full tracebacks (same as TITO_DEBUG=1).")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """tito: the course command line."""
    if debug:
        os.environ["TITO_DEBUG"] = "1"


def run() -> None:
    app(prog_name="tito")


if __name__ == "__main__":  # python -m tito.cli.main
    run()
