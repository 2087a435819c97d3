"""A tinytorch GPT in Hugging Face's GPT-2 layout: `GPT2LMHeadModel.from_pretrained` reads it.

`save_gpt2(model, folder, tokenizer)` writes config.json, model.safetensors and the tokenizer;
`load_gpt2(folder)` rebuilds the tinytorch GPT. Only numpy and `safetensors` are used (the `hf`
extra), and only when one of these functions is called; docs/huggingface.md is the guide.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it builds on module 13's GPT.
"""

import json
import tempfile
from pathlib import Path

import numpy as np

from tinytorch.models import transformer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tinytorch_tokenizer.json"  # CharTokenizer.load / BPETokenizer.load read it
INSTALL_HINT = 'pip install "tinytorch-course[hf]" (pip install -e ".[hf]" in a clone)'
GELU_TANH = ("gelu_new", "gelu_pytorch_tanh")  # GPT-2's GELU, tanh approximation, as ours
LAYER_NORM_EPS = 1e-5  # our LayerNorm's default and GPT-2's


class UnsupportedArchitecture(ValueError):
    """A model option GPT-2 (or tinytorch, on the way back) cannot express; the message names it."""


def _safetensors():
    try:
        import safetensors.numpy
    except ImportError:
        raise ImportError(
            f"the Hugging Face export needs the safetensors package: {INSTALL_HINT}"
        ) from None
    return safetensors.numpy


def check_gpt2_compatible(model) -> None:
    """Raise UnsupportedArchitecture, naming the option, unless GPT-2 computes what `model` does."""
    config = model.config
    if not config.norm_first:
        problem = "post-norm blocks (norm_first=False); GPT-2 normalises before each sub-layer"
    elif config.position != "learned":
        problem = f"position={config.position!r}; GPT-2 learns one vector per position"
    elif model.lm_head is not None and np.any(model.lm_head.bias.data):
        problem = (
            "a trained bias on the untied output layer (lm_head.bias), which GPT-2's lm_head "
            "lacks; train with tie_weights=True (GPT-2's own choice) to export"
        )
    elif {norm.eps for norm in _norms(model)} != {LAYER_NORM_EPS}:
        problem = f"LayerNorm eps other than {LAYER_NORM_EPS} in some layers"
    else:
        return
    raise UnsupportedArchitecture(f"GPT-2 cannot express {problem}")


def _norms(model) -> list:
    return [norm for b in model.blocks for norm in (b.ln1, b.ln2)] + [model.ln_f]


def gpt2_config(model) -> dict:
    """The config.json of `model` as a GPT2LMHeadModel (dropout off: ours has none)."""
    check_gpt2_compatible(model)
    c = model.config
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": c.vocab_size,
        "n_positions": c.max_seq_len,
        "n_embd": c.embed_dim,
        "n_layer": c.num_layers,
        "n_head": c.num_heads,
        "n_inner": model.blocks[0].mlp.linear1.weight.shape[1],  # mlp_ratio * embed_dim
        "activation_function": "gelu_new",
        "layer_norm_epsilon": LAYER_NORM_EPS,
        "tie_word_embeddings": model.lm_head is None,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "bos_token_id": None,  # GPT-2's 50256 lies outside a small vocabulary
        "eos_token_id": None,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "initializer_range": 0.02,
        "use_cache": True,
        "dtype": "float32",
    }


def _layout(model):
    """(GPT-2 name, our tensors in fused order, transposed?) for every GPT-2 weight."""
    yield "transformer.wte.weight", [model.token_embedding.weight], False
    yield "transformer.wpe.weight", [model.position_embedding.weight], False
    for i, block in enumerate(model.blocks):
        h, att, mlp = f"transformer.h.{i}.", block.attention, block.mlp
        qkv = (att.q_proj, att.k_proj, att.v_proj)  # c_attn = [q | k | v] on the output axis
        yield h + "ln_1.weight", [block.ln1.gamma], False
        yield h + "ln_1.bias", [block.ln1.beta], False
        yield h + "attn.c_attn.weight", [p.weight for p in qkv], False  # (C, 3C), (in, out)
        yield h + "attn.c_attn.bias", [p.bias for p in qkv], False  # (3C,)
        yield h + "attn.c_proj.weight", [att.out_proj.weight], False
        yield h + "attn.c_proj.bias", [att.out_proj.bias], False
        yield h + "ln_2.weight", [block.ln2.gamma], False
        yield h + "ln_2.bias", [block.ln2.beta], False
        yield h + "mlp.c_fc.weight", [mlp.linear1.weight], False
        yield h + "mlp.c_fc.bias", [mlp.linear1.bias], False
        yield h + "mlp.c_proj.weight", [mlp.linear2.weight], False
        yield h + "mlp.c_proj.bias", [mlp.linear2.bias], False
    yield "transformer.ln_f.weight", [model.ln_f.gamma], False
    yield "transformer.ln_f.bias", [model.ln_f.beta], False
    if model.lm_head is not None:
        yield "lm_head.weight", [model.lm_head.weight], True  # nn.Linear: (vocab, C)


def to_gpt2_state_dict(model) -> dict[str, np.ndarray]:
    """Every weight under GPT2LMHeadModel's name and layout, float32 (tied: no lm_head entry)."""
    check_gpt2_compatible(model)
    out = {}
    for name, tensors, transpose in _layout(model):
        value = np.concatenate([t.data for t in tensors], axis=-1)
        out[name] = np.ascontiguousarray(value.T if transpose else value, dtype=np.float32)
    return out


def _check_gpt2_config(config: dict) -> None:
    settings = [
        ("model_type", config.get("model_type"), "gpt2"),
        ("activation_function", config.get("activation_function", "gelu_new"), GELU_TANH),
        ("layer_norm_epsilon", config.get("layer_norm_epsilon", 1e-5), LAYER_NORM_EPS),
        ("scale_attn_weights", config.get("scale_attn_weights", True), True),
        ("scale_attn_by_inverse_layer_idx", config.get("scale_attn_by_inverse_layer_idx"), False),
        ("add_cross_attention", config.get("add_cross_attention", False), False),
    ]
    for key, value, wanted in settings:
        if value not in (wanted if isinstance(wanted, tuple) else (wanted, None)):
            raise UnsupportedArchitecture(
                f"tinytorch's GPT cannot express {key}={value!r} (it needs {wanted!r})"
            )


def from_gpt2_state_dict(config: dict, state: dict):
    """A tinytorch GPT holding the weights of a GPT-2 config and state dict (arrays)."""
    _check_gpt2_config(config)
    embed_dim = config["n_embd"]
    hidden = config.get("n_inner") or 4 * embed_dim
    model = transformer.GPT(
        config["vocab_size"], embed_dim, config["n_layer"], config["n_head"],
        max_seq_len=config["n_positions"], mlp_ratio=hidden / embed_dim,
        tie_weights=config.get("tie_word_embeddings", True),
    )  # fmt: skip
    if model.blocks and model.blocks[0].mlp.linear1.weight.shape[1] != hidden:
        raise UnsupportedArchitecture(f"n_inner={hidden} is not a whole multiple of n_embd")
    state = {k.removeprefix("transformer."): v for k, v in state.items()}
    for name, tensors, transpose in _layout(model):
        key = name.removeprefix("transformer.")
        if key not in state:
            raise KeyError(f"the GPT-2 checkpoint has no '{name}'; it is not a GPT-2 model")
        value = np.asarray(state[key], dtype=np.float32)
        parts = np.split(value.T if transpose else value, len(tensors), axis=-1)
        for tensor, part in zip(tensors, parts, strict=True):
            if part.shape != tensor.shape:
                raise ValueError(
                    f"'{name}' has shape {value.shape}, which does not fit config.json"
                )
            tensor.data[...] = part
    if model.lm_head is not None:
        model.lm_head.bias.data[...] = 0  # GPT-2's lm_head has no bias
    return model


def tokenizer_json(tokenizer) -> dict:
    """A module-10 tokenizer as Hugging Face `tokenizers` JSON: AutoTokenizer then gives the same
    ids and decodes to the same text. Characters: one token each (WordLevel); byte-pair
    encoding: GPT-2's byte-level BPE with our chunking regex and our merges in their order."""
    if hasattr(tokenizer, "merges"):
        return bpe_tokenizer_json(tokenizer)
    return char_tokenizer_json(tokenizer)


def char_tokenizer_json(tokenizer) -> dict:
    """A character tokenizer as `tokenizers` JSON, one token per character."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Split",
            "pattern": {"Regex": "[\\s\\S]"},  # every character, newlines included, on its own
            "behavior": "Isolated",
            "invert": False,
        },
        "post_processor": None,
        "decoder": {"type": "Fuse"},  # concatenate the characters back, no spaces between
        "model": {
            "type": "WordLevel",
            "vocab": {token: i for i, token in enumerate(tokenizer.vocab)},
            "unk_token": "<unk>",
        },
    }


def byte_alphabet() -> list[str]:
    """GPT-2's printable stand-in for each byte value (the ByteLevel alphabet), by byte."""
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    out, extra = [], 0
    for byte in range(256):
        out.append(chr(byte) if byte in printable else chr(256 + extra))
        extra += byte not in printable
    return out


def bpe_tokenizer_json(tokenizer) -> dict:
    """A byte-level BPETokenizer as `tokenizers` JSON.

    Our encoder applies the merges in the order learned, to the UTF-8 bytes of each chunk of
    `CHUNK`; Hugging Face's BPE applies the lowest-ranked merge first within each pre-token,
    which is the same thing, as a merge only ever creates a token later merges use.
    """
    from tinytorch.text.tokenization import CHUNK

    alphabet = byte_alphabet()
    pieces = ["".join(alphabet[b] for b in token) for token in tokenizer.vocab]
    if len(set(pieces)) != len(pieces):
        seen = {}
        twice = next(p for i, p in enumerate(pieces) if seen.setdefault(p, i) != i)
        raise UnsupportedArchitecture(
            f"the BPE vocabulary holds the token {twice!r} twice (two merges spell it); "
            "Hugging Face's BPE needs each token once"
        )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": CHUNK.pattern}, "behavior": "Isolated",
                 "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                 "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {piece: i for i, piece in enumerate(pieces)},
            "merges": [[pieces[a], pieces[b]] for a, b in tokenizer.merges],
        },
    }  # fmt: skip


def _json_text(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def save_gpt2(model, folder, tokenizer=None) -> list[str]:
    """Write `folder` as `save_pretrained` would, plus the tokenizer; returns the file names.

    config.json and model.safetensors always; with a tokenizer, TOKENIZER_FILE (tinytorch's own)
    and tokenizer.json and tokenizer_config.json for AutoTokenizer (characters or BPE).
    """
    tensors, config = to_gpt2_state_dict(model), gpt2_config(model)
    files = {
        CONFIG_FILE: _json_text(config),
        WEIGHTS_FILE: _safetensors().save(tensors, metadata={"format": "pt"}),  # the file's bytes
    }
    if tokenizer is not None:
        files[TOKENIZER_FILE] = None  # written by tokenizer.save
        files["tokenizer.json"] = _json_text(tokenizer_json(tokenizer))
        files["tokenizer_config.json"] = _json_text({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "clean_up_tokenization_spaces": False,  # decode gives back the text unchanged
            "model_max_length": config["n_positions"],
        })  # fmt: skip
    from tinytorch.core.checkpoint import write_atomic  # module 07: the package's one writer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer is not None:
        with tempfile.TemporaryDirectory() as scratch:
            tokenizer.save(Path(scratch) / TOKENIZER_FILE)  # tinytorch's own format, as saved
            files[TOKENIZER_FILE] = (Path(scratch) / TOKENIZER_FILE).read_bytes()
    for name, content in files.items():
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        write_atomic(folder / name, lambda handle, data=data: handle.write(data))  # never half
    return list(files)


def load_gpt2(folder):
    """The tinytorch GPT of a GPT-2 folder (config.json and model.safetensors, or its shards)."""
    folder = Path(folder)
    load_file = _safetensors().load_file
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {folder / CONFIG_FILE}: {err}") from None
    index = folder / (WEIGHTS_FILE + ".index.json")  # sharded checkpoints list their files
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() \
        else [WEIGHTS_FILE]  # fmt: skip
    state = {}
    for name in files:
        if not (folder / name).is_file():
            raise ValueError(f"{folder} has no {name}; save the model with safetensors")
        state.update(load_file(folder / name))
    return from_gpt2_state_dict(config, state)


__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "TOKENIZER_FILE", "INSTALL_HINT",
    "GELU_TANH", "LAYER_NORM_EPS", "UnsupportedArchitecture", "check_gpt2_compatible",
    "gpt2_config", "to_gpt2_state_dict", "from_gpt2_state_dict",
    "tokenizer_json", "char_tokenizer_json", "byte_alphabet", "bpe_tokenizer_json", "save_gpt2", "load_gpt2"]  # fmt: skip
