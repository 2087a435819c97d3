"""tito model: carry a trained GPT to Hugging Face's GPT-2 layout and back (docs/huggingface.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tito.cli.console import console, ok, safe
from tito.errors import TitoError

app = typer.Typer(
    help="Carry a trained GPT to Hugging Face (GPT-2 layout) and back.",
    no_args_is_help=True,
)


def read_model(path: Path, allow_partial: bool = False):
    """(GPT, tokenizer or None) from a milestone run folder or checkpoint, or a save_model file.

    A run is read by milestones.runs.load_run, which owns the checkpoint format: the model as it
    was trained and the tokenizer it was trained with (characters or byte-pair merges).
    """
    from milestones import MilestoneError
    from milestones.runs import checkpoint_path, load_run, require_finished
    from tinytorch.core.training import read_checkpoint
    from tinytorch.models.weights import MODEL_CONFIG, load_model

    path = checkpoint_path(path)
    if not path.is_file():
        raise TitoError(
            f"no checkpoint at {path}",
            hint="train one with `tito milestone run gpt` (it writes runs/gpt/checkpoint.npz)",
        )
    try:
        saved_model = MODEL_CONFIG in read_checkpoint(path)[3]
    except Exception as err:  # noqa: BLE001 - any failure here means an unreadable file
        raise TitoError(f"{path} is not a readable checkpoint ({type(err).__name__})") from None
    if saved_model:
        return load_model(path), None
    try:
        require_finished(path, allow_partial)
        run = load_run(path)
    except MilestoneError as err:
        raise TitoError(err.message, hint=err.hint) from None
    except KeyError as err:
        raise TitoError(
            f"{path} is a training checkpoint without the milestone's model description ({err})",
            hint="export a `tito milestone run gpt` checkpoint or a file written by save_model",
        ) from None
    return run.model, run.tokenizer


@app.command()
def export(
    checkpoint: Annotated[
        Path, typer.Argument(help="A milestone run folder or checkpoint.npz, or a save_model file.")
    ],
    folder: Annotated[Path, typer.Argument(help="Output folder (created if needed).")],
    tokenizer: Annotated[
        Path | None,
        typer.Option(help="A saved tinytorch tokenizer to put beside the model."),
    ] = None,
    allow_partial: Annotated[
        bool,
        typer.Option("--allow-partial", help="Export a run that stopped before its last step."),
    ] = False,
) -> None:
    """Write FOLDER for GPT2LMHeadModel (a Llama: LlamaForCausalLM).

    The folder holds the config, the weights and the tokenizer.
    """
    from tinytorch.models import huggingface

    model, tok = read_model(checkpoint, allow_partial)
    if tokenizer is not None:
        tok = _read_tokenizer(tokenizer)
    # module 21's Llama goes to LlamaForCausalLM, a GPT to GPT2LMHeadModel
    llama = type(model).__name__ == "Llama"
    if llama:
        from tinytorch.models.llama_weights import save_llama
    try:
        written = (save_llama if llama else huggingface.save_gpt2)(model, folder, tok)
    except huggingface.UnsupportedArchitecture as err:
        raise TitoError(f"cannot export {checkpoint}: {err}") from None
    except ImportError as err:
        raise TitoError(str(err)) from None
    ok(f"wrote {', '.join(written)} to {folder}")
    console.print(
        f"[note]load it with {'LlamaForCausalLM' if llama else 'GPT2LMHeadModel'}"
        f'.from_pretrained("{safe(folder)}"); '
        "see docs/huggingface.md[/note]",
        soft_wrap=True,
    )


def _read_tokenizer(path: Path):
    from tinytorch.text.tokenization import BPETokenizer, CharTokenizer

    try:
        kind = json.loads(path.read_text(encoding="utf-8")).get("type")
    except (OSError, json.JSONDecodeError, AttributeError) as err:
        raise TitoError(f"cannot read the tokenizer {path}: {err}") from None
    loaders = {"char": CharTokenizer.load, "bpe": BPETokenizer.load}
    if kind not in loaders:
        raise TitoError(f"{path} is not a saved tinytorch tokenizer (type {kind!r})")
    return loaders[kind](path)


@app.command("import")
def import_(
    folder: Annotated[Path, typer.Argument(help="A GPT-2 folder: config.json, model.safetensors.")],
    out: Annotated[Path, typer.Argument(help="The tinytorch .npz to write (save_model format).")],
) -> None:
    """Load a GPT-2 checkpoint folder into a tinytorch GPT and save it with save_model."""
    from tinytorch.models import huggingface
    from tinytorch.models.weights import save_model

    if not folder.is_dir():  # before any question of installed packages
        raise TitoError(
            f"{folder} is not a folder",
            hint="give the GPT-2 folder that holds config.json and model.safetensors",
        )
    try:
        model = huggingface.load_gpt2(folder)
    except (ValueError, KeyError) as err:  # UnsupportedArchitecture is a ValueError
        raise TitoError(f"cannot import {folder}: {err.args[0]}") from None
    except ImportError as err:
        raise TitoError(str(err)) from None
    save_model(model, out)
    ok(f"wrote {out} (load it with tinytorch.models.weights.load_model)")
