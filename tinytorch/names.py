"""The one table of tinytorch's public names: where each lives, and every path it is offered at.

A name has one home, the package file that defines it (written by the course module that builds
it, or a given file). The short paths a PyTorch user looks in (`tinytorch.nn.Linear`,
`tinytorch.optim.AdamW`, `tinytorch.Tensor`) and the course paths (`tinytorch.core.transformer`)
hold no code: their `__getattr__` comes from `lazy_module` below, which imports the home on first
use, so every path imports at every stage of the course, and a name whose home is not in the
package yet says which module to complete. tests/tito/test_names.py imports every name from its
home and from every path listed here, and checks the course numbers against tito's catalog.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import types

# The course module that writes each home file ("core.tensor" -> "01 tensor"), as tito's module
# table says: tito's exporter writes it into tinytorch/course.json with every export, and
# `tito module export --all --check` fails when it drifts. Given files are not listed: they are
# always in the package.
COURSE_FILE = "course.json"


def course() -> dict[str, str]:
    """The course module that writes each home file, read from tinytorch/course.json."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), COURSE_FILE)
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


TOP, NN, OPTIM, F = "tinytorch", "tinytorch.nn", "tinytorch.optim", "tinytorch.nn.functional"
CORE_EMB, CORE_TF = "tinytorch.core.embeddings", "tinytorch.core.transformer"
MEMO, ACCEL = "tinytorch.memo", "tinytorch.accel"
PROFILE, COMPRESS = "tinytorch.profile", "tinytorch.compress"

# (home under tinytorch., names it defines, the paths besides the home that offer them)
TABLE: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("core.tensor", ("Tensor", "ShapeError", "is_grad_enabled"), (TOP,)),
    ("core.autograd", ("no_grad", "enable_autograd"), (TOP,)),
    ("core.layers", ("Module", "Layer", "Linear", "Dropout", "Sequential"), (NN, TOP)),
    ("core.activations", ("ReLU", "Sigmoid", "Tanh", "GELU", "Softmax"), (NN, TOP)),
    ("core.activations", ("relu", "sigmoid", "tanh", "gelu", "softmax"), (F,)),
    ("core.losses", ("MSELoss", "CrossEntropyLoss"), (NN, TOP, "tinytorch.core.training")),
    ("core.losses", ("BCELoss", "BCEWithLogitsLoss"), (NN, TOP)),
    ("core.losses", ("mse_loss", "cross_entropy", "log_softmax", "binary_cross_entropy",
                     "binary_cross_entropy_with_logits"), (F,)),
    ("text.embeddings", ("Embedding", "PositionalEncoding", "LearnedPositionalEncoding"),
     (NN, CORE_EMB)),
    ("text.embeddings", ("EmbeddingLookup", "plot_encoding", "sinusoidal_table",
                         "token_ids_array"), (CORE_EMB,)),
    ("core.spatial", ("Conv2d", "MaxPool2d", "AvgPool2d", "BatchNorm2d", "Flatten"), (NN, TOP)),
    ("core.attention", ("MultiHeadAttention",), (NN,)),
    ("nn.normalization", ("LayerNorm",), (NN, CORE_TF)),
    ("nn.feedforward", ("MLP",), (NN, CORE_TF)),
    ("models.transformer", ("TransformerBlock",), (NN, CORE_TF)),
    ("models.transformer", ("GPT", "GPTConfig", "PRESETS"), (CORE_TF,)),
    ("models.seq2seq", ("DecoderBlock", "TransformerEncoder"), (NN, CORE_TF)),
    ("models.seq2seq", ("Seq2SeqTransformer",), (CORE_TF,)),
    ("models.scaling", ("count_parameters", "estimate_parameters", "estimate_memory"), (CORE_TF,)),
    ("models.weights", ("save_model", "load_model", "to_torch_state_dict",
                        "load_torch_state_dict"), (CORE_TF,)),
    ("nn.llama", ("RMSNorm", "RotaryEmbedding", "SiLU", "SwiGLU"), (NN,)),
    ("nn.llama", ("silu",), (F,)),
    ("models.llama", ("GroupedQueryAttention",), (NN,)),
    ("models.llama", ("Llama", "LlamaConfig", "LlamaBlock"), (CORE_TF,)),
    ("core.optimizers", ("Optimizer", "SGD", "Adam", "AdamW"), (OPTIM, TOP)),
    ("memo.kvcache", ("KVCache", "kv_cache_bytes", "cache_bytes"), (MEMO,)),
    ("memo.generation", ("cached_attention", "new_caches", "cached_forward", "cached_generate"),
     (MEMO,)),
    ("memo.decoder", ("cached_decode",), (MEMO,)),
    ("accel.accelerate", ("accelerate", "plain", "accelerated", "parts_for", "PARTS", "LESSONS"),
     (ACCEL,)),
    ("accel.kernels", ("FusedAttention", "QKVProjection", "FusedLayerNorm", "FusedGELU",
                       "softmax_rows_", "SortedEmbeddingLookup"), (ACCEL,)),
    ("accel.optim", ("FusedAdam",), (ACCEL,)),
    ("accel.parallel", ("DataParallel",), (ACCEL,)),
    ("profile.flops", ("parameter_counts", "matmul_flops", "forward_flops", "backward_flops",
                       "gpt_step_flops"), (PROFILE,)),
    ("profile.profiler", ("Profiler", "Latency", "latency", "by_operation", "matmul_share"),
     (PROFILE,)),
    ("profile.events", ("OpEvent", "OpRow"), (PROFILE,)),
    ("profile.runs", ("Profile", "profile_step", "profile_generation"), (PROFILE,)),
    ("profile.report", ("machine_rates", "operation_table", "plot_time", "plot_roofline"),
     (PROFILE,)),
    ("compress.quantization", ("qrange", "quant_params", "quantize", "dequantize",
                               "fake_quantize", "RangeObserver", "calibrate", "QuantizedLinear",
                               "quantize_model", "model_bytes"), (COMPRESS,)),
    ("compress.pruning", ("magnitude_mask", "prune", "sparsity_of", "sparse_bytes",
                          "prune_neurons", "PrunedAttention", "prune_structure"), (COMPRESS,)),
    ("compress.lowrank", ("LowRankLinear", "low_rank", "factorize"), (COMPRESS,)),
    ("compress.distillation", ("DistillationLoss", "distillation_loss", "distill_step",
                               "half_size"), (COMPRESS,)),
)  # fmt: skip


def home(name: str, path: str) -> str:
    """The dotted module that defines `name`, as offered at `path`; KeyError if not offered."""
    for where, names, paths in TABLE:
        if name in names and path in paths:
            return f"tinytorch.{where}"
    raise KeyError(name)


def offered(path: str) -> list[str]:
    """The names `path` offers, in table order."""
    return [n for _, names, paths in TABLE if path in paths for n in names]


def _missing(path: str, name: str, module: str) -> ImportError:
    number, slug = course()[module.removeprefix("tinytorch.")].split()
    return ImportError(
        f"{path}.{name} comes from course module {number} {slug}, which this tinytorch does not "
        f"have yet: tito module complete {int(number)} (or tito module export {int(number)} for "
        "the reference)",
        name=module,
    )


class _Path(types.ModuleType):
    """A path module whose offered names win over its submodules of the same name.

    Importing `tinytorch.accel.accelerate` (the file) sets the attribute `accelerate` of
    `tinytorch.accel` to that submodule; `from tinytorch.accel import accelerate` must still give
    the function the table offers. The file stays reachable as importlib.import_module(...).
    """

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            if name in offered(self.__name__):
                return
        super().__setattr__(name, value)


def lazy_module(path: str, subpackages: tuple[str, ...] = ()):
    """A module `__getattr__` and `__dir__` for `path`: each name imported from its home on
    first use; a home (or a file it imports) that the course has not written yet is named."""
    names = offered(path)
    sys.modules[path].__class__ = _Path  # the path module is being executed: it is there

    def __getattr__(name):
        if name in subpackages:
            return importlib.import_module(f"{path}.{name}")
        if name not in names:
            raise AttributeError(f"module {path!r} has no attribute {name!r}")
        where = home(name, path)
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as err:
            if (err.name or "").removeprefix("tinytorch.") not in course():
                raise
            raise _missing(path, name, err.name) from None
        return getattr(module, name)

    def __dir__():
        return sorted(set(names) | set(subpackages))

    return __getattr__, __dir__, sorted(names)
