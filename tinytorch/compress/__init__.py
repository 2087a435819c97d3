"""Compression (course modules 15 and 16): integer weights, pruning, low rank, distillation.

    from tinytorch.compress import quantize_model, model_bytes
    q8 = quantize_model(gpt, bits=8, per_channel=True)

Each name is imported from its module on first use, so this package imports at every stage.
"""

from tinytorch import lazy_names

_HOMES = {
    "qrange": "tinytorch.compress.quantization",
    "quant_params": "tinytorch.compress.quantization",
    "quantize": "tinytorch.compress.quantization",
    "dequantize": "tinytorch.compress.quantization",
    "fake_quantize": "tinytorch.compress.quantization",
    "RangeObserver": "tinytorch.compress.quantization",
    "calibrate": "tinytorch.compress.quantization",
    "QuantizedLinear": "tinytorch.compress.quantization",
    "quantize_model": "tinytorch.compress.quantization",
    "model_bytes": "tinytorch.compress.quantization",
    "magnitude_mask": "tinytorch.compress.pruning",
    "prune": "tinytorch.compress.pruning",
    "sparsity_of": "tinytorch.compress.pruning",
    "sparse_bytes": "tinytorch.compress.pruning",
    "prune_neurons": "tinytorch.compress.pruning",
    "PrunedAttention": "tinytorch.compress.pruning",
    "prune_structure": "tinytorch.compress.pruning",
    "LowRankLinear": "tinytorch.compress.lowrank",
    "low_rank": "tinytorch.compress.lowrank",
    "factorize": "tinytorch.compress.lowrank",
    "DistillationLoss": "tinytorch.compress.distillation",
    "distillation_loss": "tinytorch.compress.distillation",
    "distill_step": "tinytorch.compress.distillation",
    "half_size": "tinytorch.compress.distillation",
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names("tinytorch.compress", _HOMES)
