"""Checkpoints: exact resume, no pickle, clear errors for files that do not fit."""

import os
import stat

import numpy as np
import pytest

from tinytorch.core.activations import Tanh
from tinytorch.core.layers import Linear, Module
from tinytorch.core.losses import MSELoss
from tinytorch.core.optimizers import SGD, Adam, AdamW
from tinytorch.core.training import load_checkpoint, save_checkpoint, seed_everything, train_step

mse = MSELoss()


class MLP(Module):
    def __init__(self, hidden=8):
        self.fc1, self.act, self.fc2 = Linear(3, hidden), Tanh(), Linear(hidden, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (
            rng.standard_normal((8, 3)).astype(np.float32),
            rng.standard_normal((8, 2)).astype(np.float32),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda ps: AdamW(ps, lr=1e-2), id="AdamW"),
        pytest.param(lambda ps: SGD(ps, 0.1, 0.9), id="SGD"),
    ],
)
def test_round_trip_resumes_training_identically(tmp_path, make):
    batches = _batches(6)
    seed_everything(0)
    model = MLP()
    opt = make(model.parameters())
    for x, y in batches[:3]:
        train_step(model, mse, opt, x, y)
    path = tmp_path / "ckpt.npz"
    save_checkpoint(path, model, opt, step=3, extra={"run": "demo", "losses": [1.5, 0.5]})

    seed_everything(99)  # a differently initialised twin
    twin = MLP()
    twin_opt = make(twin.parameters())
    twin_opt.lr = 5.0
    info = load_checkpoint(path, twin, twin_opt)
    assert info == {"step": 3, "extra": {"run": "demo", "losses": [1.5, 0.5]}}
    probe = batches[0][0]
    np.testing.assert_array_equal(twin(probe).data, model(probe).data)
    assert twin_opt.lr == opt.lr

    for x, y in batches[3:]:
        assert train_step(twin, mse, twin_opt, x, y) == train_step(model, mse, opt, x, y)
    for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
        assert q.data.dtype == np.float32


def test_file_holds_plain_arrays_and_json_metadata(tmp_path):
    model = Linear(3, 2)
    path = tmp_path / "ckpt.npz"
    extra = {"config": {"embed_dim": 8}, "curve": np.linspace(0, 1, 5), "scale": np.float32(0.5)}
    save_checkpoint(path, model, Adam(model.parameters()), step=12, extra=extra)
    with np.load(path, allow_pickle=False) as archive:
        kinds = {key: archive[key].dtype.kind for key in archive.files}
        meta = archive["extra_json"]
    assert "O" not in kinds.values()
    assert meta.dtype.kind == "U" and meta.shape == (1,)
    assert kinds["model.weight"] == "f" and kinds["optimizer.lr"] == "f"
    info = load_checkpoint(path, Linear(3, 2))
    assert info["step"] == 12 and info["extra"]["config"] == {"embed_dim": 8}
    assert info["extra"]["scale"] == 0.5
    np.testing.assert_array_equal(info["extra"]["curve"], np.linspace(0, 1, 5))


def test_write_is_atomic_and_leaves_no_temporary_files(tmp_path):
    model = Linear(2, 2)
    path = tmp_path / "ckpt.npz"
    save_checkpoint(path, model, step=1)
    save_checkpoint(path, model, step=2)  # replaces the old file
    assert load_checkpoint(path, model)["step"] == 2
    with pytest.raises(TypeError, match="neither JSON nor a numpy array"):
        save_checkpoint(path, model, step=3, extra={"bad": {1, 2}})
    assert load_checkpoint(path, model)["step"] == 2  # the failed save left the old file
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_checkpoint_permissions_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        save_checkpoint(tmp_path / "ckpt.npz", Linear(2, 2), step=1)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ckpt.npz").stat().st_mode) == 0o666 & ~umask


def test_pickled_object_array_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, **{"model.weight": np.array([object()], dtype=object)})
    with pytest.raises(ValueError, match="contains pickled Python objects"):
        load_checkpoint(path, Linear(3, 2))


def test_checkpoint_of_another_shape_is_refused(tmp_path):
    path = tmp_path / "ckpt.npz"
    save_checkpoint(path, Linear(3, 2))
    target = Linear(4, 2)
    before = target.weight.data.copy()
    with pytest.raises(ValueError, match=r"'weight' is \(3, 2\) in the checkpoint but \(4, 2\)"):
        load_checkpoint(path, target)
    np.testing.assert_array_equal(target.weight.data, before)
    with pytest.raises(ValueError, match=r"missing \['fc1.bias', 'fc1.weight'"):
        load_checkpoint(path, MLP())


def test_optimizer_mismatches_are_refused(tmp_path):
    model = Linear(3, 2)
    path = tmp_path / "ckpt.npz"
    save_checkpoint(path, model, Adam(model.parameters()))
    with pytest.raises(ValueError, match="holds Adam state but the optimizer is SGD"):
        load_checkpoint(path, model, SGD(model.parameters(), lr=0.1))
    save_checkpoint(path, model)
    with pytest.raises(ValueError, match="holds no optimizer state"):
        load_checkpoint(path, model, Adam(model.parameters()))


def test_missing_or_foreign_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "nothing.npz", Linear(1, 1))
    text = tmp_path / "notes.npz"
    text.write_text("not an archive")
    with pytest.raises(ValueError, match="is not an .npz checkpoint"):
        load_checkpoint(text, Linear(1, 1))
