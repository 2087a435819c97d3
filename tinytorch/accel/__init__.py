"""The fast versions of the lessons, course module 18: `from tinytorch.accel import accelerate`.

Imported on first use from module 18's files.
"""

from tinytorch import lazy_names

_HOMES = {
    **dict.fromkeys(("accelerate", "plain", "accelerated", "parts_for", "PARTS", "LESSONS"),
                    "tinytorch.accel.accelerate"),
    **dict.fromkeys(("FusedAttention", "QKVProjection", "FusedLayerNorm", "FusedGELU",
                     "softmax_rows_", "SortedEmbeddingLookup"), "tinytorch.accel.kernels"),
    "FusedAdam": "tinytorch.accel.optim",
    "DataParallel": "tinytorch.accel.parallel",
}  # fmt: skip
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names("tinytorch.accel", _HOMES)
