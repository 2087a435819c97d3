"""Peak resident memory of training, each implementation in its own child process.

Child: `python -m benchmarks.memory IMPL CONFIG STEPS` imports the libraries of IMPL, and with
STEPS > 0 builds the model and AdamW and runs STEPS training steps; it prints its own peak RSS.
The reported peak is that of a child running STEPS steps minus that of the same child with
STEPS = 0 (imports only): the weights, gradients, optimizer state, activations and temporaries of
training, without the interpreter and the imported libraries.

The peak is `resource.getrusage(RUSAGE_SELF).ru_maxrss`, except on Linux, where that value
survives `execve` and so starts at the RSS of the (large) benchmark process that spawned the
child; there the child's own high-water mark VmHWM from /proc/self/status is used (both printed).
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

from benchmarks.common import CONFIGS, ROOT, batches, limit_threads


def _child(impl: str, config: str, steps: int) -> None:
    cfg = CONFIGS[config]
    if impl == "tinytorch":
        limit_threads(with_torch=False)
        from benchmarks.common import TinyTrainer as Trainer
        from tinytorch.core.optimizers import AdamW  # noqa: F401 - part of the baseline
        from tinytorch.models.transformer import GPT

        make = lambda: GPT(**cfg.gpt_kwargs())  # noqa: E731
    else:
        limit_threads(with_torch=True)
        from benchmarks.common import TorchTrainer as Trainer
        from benchmarks.common import torch_reference

        gpt = torch_reference().TorchGPT
        make = lambda: gpt.from_config(cfg.gpt_kwargs())  # noqa: E731
    if steps:
        trainer = Trainer(make())
        for x, y in batches(cfg, steps):
            trainer.step(x, y)
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status = Path("/proc/self/status")
    hwm = re.search(r"VmHWM:\s*(\d+) kB", status.read_text()) if status.is_file() else None
    peak = int(hwm.group(1)) if hwm else maxrss
    print(json.dumps({"peak_kib": peak, "ru_maxrss_kib": maxrss}))


def _measure(impl: str, config: str, steps: int) -> int:
    cmd = [sys.executable, "-m", "benchmarks.memory", impl, config, str(steps)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory child {' '.join(cmd[2:])} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_kib"]


def peak_memory(config: str, steps: int) -> dict:
    """Training peak RSS (MiB) of each implementation above its import-only baseline."""
    raw = {}
    for kind, n in (("baseline", 0), ("run", steps)):
        for impl in ("tinytorch", "torch"):  # alternate, so a drifting machine hits both
            raw[impl, kind] = _measure(impl, config, n)
    out: dict = {
        "steps": steps,
        "subtracted": "peak RSS of the same child importing the libraries only",
    }
    for impl in ("tinytorch", "torch"):
        out[impl] = {
            "baseline_mib": raw[impl, "baseline"] / 1024,
            "run_mib": raw[impl, "run"] / 1024,
            "peak_mib": (raw[impl, "run"] - raw[impl, "baseline"]) / 1024,
        }
    return out


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
