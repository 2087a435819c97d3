"""A package staged for module 18 (grading, `complete`) holds the modules it requires and no
later one: no module 21, so no tinytorch/accel/llama.py (GIVEN_REQUIRES (18, 21)), and no
module 17, so no tinytorch/accel/decode.py (its cached generation); the given `accelerate` there
must accelerate a GPT without either."""

import subprocess
import sys

from tito.curriculum import exporter, staging
from tito.curriculum.catalog import MODULES

STAGED_GPT = """
import os, sys
sys.path.insert(0, os.getcwd())  # the staged package, not the installed one
import tinytorch
print(tinytorch.__file__)
from tinytorch.accel.accelerate import accelerate, accelerated
from tinytorch.models.transformer import GPT
gpt = accelerate(GPT(11, 16, 1, 2, max_seq_len=8))
print(sorted(accelerated(gpt)))
print(hasattr(gpt, "fast_generation"), gpt.generate([[1, 2]], 3).shape)
"""


def test_a_package_staged_for_module_18_has_no_later_file_and_accelerates_a_gpt(tmp_path):
    module = next(m for m in MODULES if m.number == 18)
    package = staging.stage_reference(module, tmp_path)
    exporter.write(staging.reference_files(module), package)
    assert (package / "accel" / "accelerate.py").is_file()
    assert not (package / "accel" / "llama.py").exists()
    assert not (package / "accel" / "decode.py").exists()
    done = subprocess.run([sys.executable, "-I", "-c", STAGED_GPT], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    where, parts, generation = done.stdout.splitlines()[-3:]
    assert where == str(package / "__init__.py")
    assert parts == "['attention', 'embedding', 'gelu', 'layernorm']"
    assert generation == "False (1, 5)"  # recomputing: no cache, no whole-token path
