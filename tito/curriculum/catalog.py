"""The module table: the single source of truth for every course module."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from tito.errors import TitoError


@dataclass(frozen=True)
class CourseModule:
    number: int
    slug: str
    title: str
    exports: tuple[str, ...]  # package modules written by the export, e.g. "core.tensor"
    requires: tuple[int, ...]  # modules whose package code this one imports
    tests: str  # pytest folder under tests/

    @property
    def name(self) -> str:
        return f"{self.number:02d}_{self.slug}"

    @property
    def source(self) -> Path:
        """Source path relative to the project root."""
        return Path("modules") / self.name / f"{self.slug}.py"

    def package_files(self) -> list[Path]:
        return [Path("tinytorch", *dotted.split(".")).with_suffix(".py") for dotted in self.exports]


MODULES: tuple[CourseModule, ...] = (
    CourseModule(1, "tensor", "Tensor", ("core.tensor",), (), "tests/01_tensor"),
    CourseModule(
        2, "activations", "Activations", ("core.activations",), (1,), "tests/02_activations"
    ),
    CourseModule(3, "layers", "Layers", ("core.layers",), (1,), "tests/03_layers"),
    CourseModule(4, "losses", "Losses", ("core.losses",), (1,), "tests/04_losses"),
    CourseModule(5, "autograd", "Autograd", ("core.autograd",), (1, 2, 3, 4), "tests/05_autograd"),
    CourseModule(
        6, "optimizers", "Optimizers", ("core.optimizers",), (1, 3, 5), "tests/06_optimizers"
    ),
    CourseModule(
        7,
        "training",
        "Training",
        ("core.training",),
        (1, 2, 3, 4, 5, 6),
        "tests/07_training",
    ),
    CourseModule(8, "dataloader", "DataLoader", ("data.loader",), (1,), "tests/08_dataloader"),
    CourseModule(
        9, "convolutions", "Convolutions", ("core.spatial",), (1, 3, 5), "tests/09_convolutions"
    ),
    CourseModule(
        10, "tokenization", "Tokenization", ("text.tokenization",), (), "tests/10_tokenization"
    ),
    CourseModule(
        11,
        "embeddings",
        "Embeddings",
        ("text.embeddings",),
        (1, 3, 5),
        "tests/11_embeddings",
    ),
    CourseModule(
        12, "attention", "Attention", ("core.attention",), (1, 2, 3, 5), "tests/12_attention"
    ),
    CourseModule(
        13,
        "transformers",
        "Transformers",
        ("nn.normalization", "nn.feedforward", "models.transformer"),
        (1, 2, 3, 4, 5, 6, 7, 11, 12),
        "tests/13_transformers",
    ),
    CourseModule(
        14,
        "profiling",
        "Profiling",
        ("profile.flops", "profile.profiler"),
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13),
        "tests/14_profiling",
    ),
    CourseModule(
        15,
        "quantization",
        "Quantization",
        ("compress.quantization",),
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13),
        "tests/15_quantization",
    ),
    CourseModule(
        16,
        "compression",
        "Compression",
        ("compress.pruning", "compress.lowrank", "compress.distillation"),
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13),
        "tests/16_compression",
    ),
    CourseModule(
        17,
        "memoization",
        "Memoization",
        ("memo.kvcache", "memo.generation"),
        (1, 3, 5, 11, 12, 13),
        "tests/17_memoization",
    ),
    CourseModule(
        18,
        "acceleration",
        "Acceleration",
        ("accel.kernels", "accel.optim"),
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13),
        "tests/18_acceleration",
    ),
    CourseModule(
        19, "benchmarking", "Benchmarking", ("bench.harness",), (), "tests/19_benchmarking"
    ),
    CourseModule(20, "capstone", "Capstone", ("olympics.rules",), (1, 4, 5), "tests/20_capstone"),
    CourseModule(
        21,
        "llama",
        "Llama",
        ("nn.llama", "models.llama"),
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 17),
        "tests/21_llama",
    ),
)


# Package files that are given product code, hand-written rather than exported from a lesson;
# every staged package (module tests, grading) holds them, like the __init__ files. Each names the
# course modules whose package code it imports (none: it imports only numpy and other given files).
GIVEN_REQUIRES: dict[str, tuple[int, ...]] = {
    "tinytorch/core/hooks.py": (),
    "tinytorch/checks.py": (),
    "tinytorch/names.py": (),  # every public name, its home and the paths that offer it
    "tinytorch/core/allocator.py": (),  # glibc's allocator tuning, run by `import tinytorch`
    "tinytorch/core/checkpoint.py": (),  # write_atomic and the .npz reader (module 07's format)
    "tinytorch/nn/functional.py": (),  # PyTorch's path to 02's and 04's functions, imported on use
    "tinytorch/core/embeddings.py": (11,),  # module 11's names under the `core` path
    "tinytorch/core/transformer.py": (13,),  # module 13's and the files below, under one path
    "tinytorch/models/decoding.py": (),  # generate: argument checks, steer_logits, module 17 or not
    "tinytorch/models/weights.py": (13,),  # save_model / load_model, the PyTorch layout
    "tinytorch/models/scaling.py": (),  # parameter and memory arithmetic
    "tinytorch/models/seq2seq.py": (13,),  # encoder and encoder-decoder (translate milestone)
    "tinytorch/models/huggingface.py": (13,),  # GPT-2 layout for transformers
    "tinytorch/profile/rules.py": (),  # FLOP rules beyond matmuls, module 18's kernels' rules
    "tinytorch/profile/events.py": (),  # the profiler's OpEvent and OpRow records
    "tinytorch/profile/runs.py": (4, 5, 14),  # profile_step, profile_generation
    "tinytorch/profile/report.py": (14,),  # the machine's roofs, the table and the plots
    "tinytorch/profile/tour.py": (6, 7, 13, 14),  # module 14's notebook tour of a trained GPT
    "tinytorch/accel/blocking.py": (),  # module 18's blocks: cache-sized pieces of arrays
    "tinytorch/accel/fused.py": (1,),  # module 18's block loops around its kernels
    "tinytorch/accel/parallel.py": (3,),  # DataParallel: a batch split over threads
    "tinytorch/accel/workers.py": (3,),  # forked processes that run a model's slices on command
    "tinytorch/accel/processes.py": (3,),  # the batch split over forked workers (Linux)
    "tinytorch/accel/accelerate.py": (2, 4, 6, 11, 12, 13, 18),  # module 18's kernels in a model
    "tinytorch/accel/decode.py": (2, 4, 6, 11, 12, 13, 17, 18),  # an accelerated GPT's cache
    "tinytorch/accel/decode_llama.py": (2, 4, 6, 11, 12, 13, 17, 18, 21),  # and a Llama's
    "tinytorch/accel/adamw.py": (3, 18),  # accelerate(optimizer): module 18's update, flat too
    "tinytorch/accel/llama.py": (18, 21),  # accelerate's fast paths for module 21's Llama parts
    "tinytorch/bench/quartiles.py": (),  # median and quartiles of timings (modules 14, 19)
    "tinytorch/bench/processes.py": (19,),  # a process per candidate, module 19's harness
    "tinytorch/memo/decoder.py": (13, 17),  # cached_decode: module 17's cache, encoder-decoder
    "tinytorch/olympics/events.py": (),  # the contest's events and measurements (module 20)
    "tinytorch/models/llama_weights.py": (),  # module 21's Llama in Meta's and HF's layouts
}
GIVEN: tuple[str, ...] = tuple(GIVEN_REQUIRES)


def number_ranges(numbers: tuple[int, ...]) -> str:
    """Module numbers with runs shortened: (1, 2, 3, 5, 7, 8, 9) -> "01-03 05 07-09"."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return " ".join(
        f"{r[0]:02d}-{r[-1]:02d}" if len(r) > 2 else " ".join(f"{n:02d}" for n in r) for r in runs
    )


def complete_key(incomplete: str) -> list[str]:
    """Shell completion for a module argument: numbers and names that start with the input."""
    keys = [f"{m.number:02d}" for m in MODULES] + [m.slug for m in MODULES]
    return [k for k in keys if k.startswith(incomplete.lower())]


# "requires" has one meaning: the modules whose package code a module imports. From it, here
# only: their closure (everything it needs installed) and its dependents
# (everything that builds on it). `module complete`, `milestone run`, grading's staged package
# and `tito test --all` all read these.


def _by_number() -> dict[int, CourseModule]:
    return {m.number: m for m in MODULES}


def closure(numbers: tuple[int, ...] | CourseModule) -> list[CourseModule]:
    """Every module the given ones need, directly or through another, in course order; given a
    module, its own requirements (not itself), given numbers, those modules and theirs."""
    by_number = _by_number()
    todo = list(numbers.requires if isinstance(numbers, CourseModule) else numbers)
    seen: set[int] = set()
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += by_number[n].requires
    return [by_number[n] for n in sorted(seen)]


def dependents(module: CourseModule) -> list[CourseModule]:
    """Every module that builds on `module`, directly or through another, in course order."""
    return [m for m in MODULES if module in closure(m)]


def stub_marker(module: CourseModule) -> str:
    """What a stubbed solution region raises (tito/curriculum/notebooks.py writes the stub): a
    package file holding it is not written yet (a student edition ships such files)."""
    return f'NotImplementedError("module {module.number:02d} {module.slug}: write this part")'


def missing(numbers: tuple[int, ...], root: Path) -> list[CourseModule]:
    """The modules among `numbers` and their closure with a package file absent under `root`, or
    still holding the stubs of a student edition.

    The one prerequisite check: `module complete` asks it for a module's requirements, `milestone
    run` for a milestone's (milestones list their module numbers and import nothing from tito).
    """
    return [m for m in closure(tuple(numbers)) if not _written(m, root)]


def _written(module: CourseModule, root: Path) -> bool:
    files = [root / f for f in module.package_files()]
    if not all(f.is_file() for f in files):
        return False
    marker = stub_marker(module)
    return not any(marker in f.read_text(encoding="utf-8", errors="replace") for f in files)


def find(key: str | int) -> CourseModule:
    """Look a module up by number ("13", "1", 13), slug ("transformers") or a path a shell
    completed for the student (workspace/01_tensor/tensor.ipynb, modules/01_tensor/)."""
    text = str(key).strip().lower()
    if "/" in text or text.endswith((".ipynb", ".py")):
        text = Path(text).stem if text.endswith((".ipynb", ".py")) else Path(text).name
    for module in MODULES:
        if text.isdigit() and int(text) == module.number:
            return module
        if text in (module.slug, module.name):
            return module
    known = ", ".join(f"{m.number:02d} {m.slug}" for m in MODULES)
    if text.isdigit():
        raise TitoError(f"there is no module {int(text):02d}", hint=f"choose one of: {known}")
    close = difflib.get_close_matches(text, [m.slug for m in MODULES], n=1, cutoff=0.6)
    if close:
        raise TitoError(f"unknown module '{key}'; did you mean '{close[0]}'?", hint=known)
    raise TitoError(f"unknown module '{key}'", hint=f"choose one of: {known}")
