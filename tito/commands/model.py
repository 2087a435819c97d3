"""tito model: carry a trained GPT to Hugging Face's GPT-2 layout and back (docs/huggingface.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tito.console import console, ok
from tito.errors import TitoError

app = typer.Typer(
    help="Carry a trained GPT to Hugging Face (GPT-2 layout) and back.",
    no_args_is_help=True,
)

MILESTONE_CHECKPOINT = "checkpoint.npz"  # what `tito milestone run gpt` writes into its folder
MILESTONE_META = "milestone_meta"  # its run metadata (config, vocabulary) as UTF-8 JSON bytes


def _gpt_from_training_checkpoint(arrays: dict, path: Path):
    """A milestone checkpoint (save_checkpoint format): the GPT and its character tokenizer."""
    import numpy as np

    from tinytorch.core.training import split_checkpoint
    from tinytorch.models.transformer import GPT
    from tinytorch.text.tokenization import CharTokenizer

    weights, _, _, extra, _ = split_checkpoint(arrays)
    if MILESTONE_META not in extra or "token_embedding.weight" not in weights:
        raise TitoError(
            f"{path} is a training checkpoint without the milestone's model description",
            hint="export a `tito milestone run gpt` checkpoint or a file written by save_model",
        )
    meta = json.loads(np.asarray(extra[MILESTONE_META]).tobytes().decode())
    vocab_size, embed_dim = weights["token_embedding.weight"].shape
    model = GPT(
        int(vocab_size),
        int(embed_dim),
        num_layers=len({k.split(".")[1] for k in weights if k.startswith("blocks.")}),
        num_heads=int(meta["config"]["num_heads"]),  # the one size the weights do not show
        max_seq_len=int(weights["position_embedding.weight"].shape[0]),
        mlp_ratio=weights["blocks.0.mlp.linear1.weight"].shape[1] / embed_dim,
        tie_weights="lm_head.weight" not in weights,
    )
    model.load_state_dict(weights)
    return model, CharTokenizer(meta["vocab"])


def read_model(path: Path):
    """(GPT, tokenizer or None) from a milestone run folder or checkpoint, or a save_model file."""
    import numpy as np

    from tinytorch.models.weights import load_model

    path = path / MILESTONE_CHECKPOINT if path.is_dir() else path
    if not path.is_file():
        raise TitoError(
            f"no checkpoint at {path}",
            hint="train one with `tito milestone run gpt` (it writes runs/gpt/checkpoint.npz)",
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except Exception as err:  # noqa: BLE001 - any failure here means an unreadable file
        raise TitoError(f"{path} is not a readable .npz file ({type(err).__name__})") from None
    if "__config__" in arrays:
        return load_model(path), None
    return _gpt_from_training_checkpoint(arrays, path)


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
) -> None:
    """Write FOLDER for GPT2LMHeadModel.from_pretrained: config, weights, tokenizer."""
    from tinytorch.models import huggingface

    model, tok = read_model(checkpoint)
    if tokenizer is not None:
        tok = _read_tokenizer(tokenizer)
    try:
        written = huggingface.save_gpt2(model, folder, tok)
    except huggingface.UnsupportedArchitecture as err:
        raise TitoError(f"cannot export {checkpoint}: {err}") from None
    except ImportError as err:
        raise TitoError(str(err)) from None
    ok(f"wrote {', '.join(written)} to {folder}")
    console.print(
        f'[note]load it with GPT2LMHeadModel.from_pretrained("{folder}"); '
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

    try:
        model = huggingface.load_gpt2(folder)
    except (ValueError, KeyError) as err:  # UnsupportedArchitecture is a ValueError
        raise TitoError(f"cannot import {folder}: {err.args[0]}") from None
    except ImportError as err:
        raise TitoError(str(err)) from None
    save_model(model, out)
    ok(f"wrote {out} (load it with tinytorch.models.weights.load_model)")
