"""The benchmark's PyTorch Llama computes what module 21's Llama does, and its rows run."""

import json
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest
import torch

from benchmarks.common import ROOT, Row, config, tiny_model
from benchmarks.torch_llama import TorchLlama
from tinytorch.accel.accelerate import accelerate, accelerated
from tinytorch.models.llama import Llama

TRAIN = Row("llama_train_small", "train", "small", batch=4, seq_len=16, steps=1, warmup=1,
            arch="llama")  # fmt: skip
GEN = Row("llama_gen_small", "generate", "small", new_tokens=4, steps=1, warmup=0, arch="llama")


def small_llama(**changes) -> Llama:
    np.random.seed(0)
    sizes = dict(vocab_size=30, embed_dim=32, num_layers=2, num_heads=4, num_kv_heads=2,
                 max_seq_len=12, multiple_of=16)  # fmt: skip
    model = Llama(**{**sizes, **changes})
    for p in model.parameters():
        p.data *= 8 if p.ndim == 2 else 1
    return model


@pytest.mark.parametrize("kv_heads, tie", [(2, False), (1, True)])
def test_same_logits_as_tinytorch(kv_heads, tie):
    model = small_llama(num_kv_heads=kv_heads, tie_weights=tie)
    tokens = np.random.default_rng(0).integers(0, 30, (2, 12))
    ref = TorchLlama.from_tinytorch(model)
    with torch.no_grad():
        theirs = ref(torch.from_numpy(tokens)).numpy()
    np.testing.assert_allclose(theirs, model(tokens).data, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fast", [False, True], ids=["lesson", "accelerated"])
def test_cached_greedy_tokens_equal_tinytorchs_even_when_the_window_slides(fast):
    model = small_llama()
    prompt = np.random.default_rng(1).integers(0, 30, (2, 5))
    ref = TorchLlama.from_tinytorch(model)
    out = ref.generate(torch.from_numpy(prompt), 14).numpy()  # past max_seq_len 12
    if fast:  # the whole-token path of tinytorch/accel/decode_llama.py
        accelerate(model, workers=1)
        assert model.fast_generation.runs(model)
    np.testing.assert_array_equal(out, model.generate(prompt, 14, temperature=0))


def test_the_llama_rows_are_a_llama_with_half_the_kv_heads():
    cfg = config(TRAIN)
    assert type(cfg).__name__ == "LlamaConfig" and cfg.num_kv_heads == cfg.num_heads // 2
    assert cfg.hidden_dim is not None and config(GEN).max_seq_len == 256
    assert isinstance(tiny_model(cfg, accelerated=False), Llama)


def test_the_llama_rows_run_accelerate_on_every_llama_part_and_the_plain_rows_on_none():
    cfg = config(TRAIN)
    assert accelerated(tiny_model(cfg)) == {"embedding", "rmsnorm", "rotary", "swiglu", "gqa"}
    assert accelerated(tiny_model(cfg, accelerated=False)) == set()


def child(library, setting, row):
    cmd = [sys.executable, "-m", "benchmarks.child", library, setting, json.dumps(asdict(row))]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("library", ["tinytorch", "tinytorch-plain", "torch"])
def test_a_llama_child_trains_and_generates(library):
    for row, metric in ((TRAIN, "step_ms"), (GEN, "tok_s")):
        done = child(library, "1t", row)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.strip().splitlines()[-1])[metric] > 0
