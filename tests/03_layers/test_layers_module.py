"""Module: parameter discovery, names, train/eval, zero_grad, state_dict round trips."""

import numpy as np
import pytest

from tinytorch.core.layers import Dropout, Linear, Module, Sequential
from tinytorch.core.tensor import ShapeError, Tensor


class Block(Module):  # like the seed's classes: never calls super().__init__()
    def __init__(self, dim):
        self.attention = Linear(dim, dim)
        self.drop = Dropout(0.1)
        self.mlp = Sequential(Linear(dim, 2 * dim), Linear(2 * dim, dim, bias=False))
        self.scale = Tensor(np.ones(dim), requires_grad=True)
        self.cache = Tensor(np.zeros(dim))  # no requires_grad: not a parameter
        self.note = "ignored"

    def forward(self, x):
        return self.mlp(self.drop(self.attention(x)))


class Tiny(Module):
    def __init__(self, dim=4, layers=2):
        self.embed = Linear(3, dim)
        self.blocks = [Block(dim) for _ in range(layers)]  # a plain list, as in the seed's GPT
        self.heads = {"lm": Linear(dim, 5)}
        self.extra = (Linear(dim, 1, bias=False),)


EXPECTED = [
    "embed.weight",
    "embed.bias",
    "blocks.0.attention.weight",
    "blocks.0.attention.bias",
    "blocks.0.mlp.layers.0.weight",
    "blocks.0.mlp.layers.0.bias",
    "blocks.0.mlp.layers.1.weight",
    "blocks.0.scale",
    "blocks.1.attention.weight",
    "blocks.1.attention.bias",
    "blocks.1.mlp.layers.0.weight",
    "blocks.1.mlp.layers.0.bias",
    "blocks.1.mlp.layers.1.weight",
    "blocks.1.scale",
    "heads.lm.weight",
    "heads.lm.bias",
    "extra.0.weight",
]


def test_named_parameters_in_attribute_order_with_dotted_names():
    model = Tiny()
    names = [name for name, _ in model.named_parameters()]
    assert names == EXPECTED
    assert [id(p) for p in model.parameters()] == [id(p) for _, p in model.named_parameters()]
    assert (
        model.blocks[1].mlp.layers[0].weight
        is dict(model.named_parameters())["blocks.1.mlp.layers.0.weight"]
    )


def test_parameter_order_is_stable_across_instances_and_calls():
    a, b = Tiny(), Tiny()
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]
    assert [id(p) for p in a.parameters()] == [id(p) for p in a.parameters()]
    assert [p.shape for p in a.parameters()] == [p.shape for p in b.parameters()]


def test_shared_parameter_is_listed_once():
    class Tied(Module):
        def __init__(self):
            self.first = Linear(3, 3)
            self.second = Linear(3, 3)
            self.second.weight = self.first.weight  # weight tying
            self.again = self.first  # the same module reachable twice

    params = Tied().parameters()
    assert len(params) == 3 and len({id(p) for p in params}) == 3
    assert [n for n, _ in Tied().named_parameters()] == [
        "first.weight",
        "first.bias",
        "second.bias",
    ]


def test_num_parameters_counts_every_value():
    model = Sequential(Linear(3, 4), Linear(4, 2, bias=False))
    assert model.num_parameters() == 3 * 4 + 4 + 4 * 2


def test_modules_lists_every_submodule_once():
    model = Tiny(layers=2)
    mods = model.modules()
    assert mods[0] is model
    assert sum(isinstance(m, Block) for m in mods) == 2
    assert sum(isinstance(m, Dropout) for m in mods) == 2
    assert sum(isinstance(m, Linear) for m in mods) == 1 + 2 * 3 + 1 + 1
    assert len({id(m) for m in mods}) == len(mods)


def test_train_and_eval_reach_every_module():
    model = Tiny()
    assert all(m.training for m in model.modules())
    assert model.eval() is model
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())
    model.train(False)
    assert not model.blocks[1].drop.training


def test_zero_grad_clears_every_gradient():
    model = Tiny()
    for p in model.parameters():
        p.grad = np.ones_like(p.data)
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_call_runs_forward():
    np.random.seed(0)
    block = Block(4).eval()
    x = Tensor(np.random.standard_normal((2, 4)))
    np.testing.assert_array_equal(block(x).data, block.forward(x).data)


def test_module_without_forward_says_so():
    with pytest.raises(NotImplementedError, match="Tiny must define forward"):
        Tiny()(np.ones(3))


def test_state_dict_copies_every_parameter():
    model = Tiny()
    state = model.state_dict()
    assert list(state) == EXPECTED
    for name, p in model.named_parameters():
        assert isinstance(state[name], np.ndarray)
        np.testing.assert_array_equal(state[name], p.data)
    state["embed.weight"][...] = 123.0  # a copy: changing it leaves the model alone
    assert not np.any(model.embed.weight.data == 123.0)


def test_load_state_dict_round_trip_in_place():
    np.random.seed(1)
    source = Tiny()
    np.random.seed(2)
    target = Tiny()
    weight = target.blocks[0].attention.weight
    target.load_state_dict(source.state_dict())
    assert target.blocks[0].attention.weight is weight  # optimizers keep their references
    for (name, p), (_, q) in zip(source.named_parameters(), target.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
        assert q.dtype == np.float32
    x = np.random.standard_normal((2, 4)).astype(np.float32)
    source.eval(), target.eval()
    np.testing.assert_array_equal(source.blocks[1](x).data, target.blocks[1](x).data)


def test_load_state_dict_accepts_float64_arrays_and_keeps_float32():
    model = Linear(2, 2)
    model.load_state_dict({"weight": np.eye(2), "bias": np.array([1.0, 2.0])})
    assert model.weight.dtype == np.float32
    np.testing.assert_array_equal(model.weight.data, np.eye(2))


def test_load_state_dict_shape_mismatch_names_key_and_shapes():
    state = Tiny(dim=4).state_dict()
    with pytest.raises(ShapeError, match=r"embed\.weight.*\(3, 6\).*\(3, 4\)"):
        Tiny(dim=4).load_state_dict({**state, "embed.weight": np.zeros((3, 6))})


def test_load_state_dict_missing_and_unexpected_keys():
    state = Tiny().state_dict()
    del state["heads.lm.bias"]
    state["blocks.9.scale"] = np.ones(4)
    with pytest.raises(KeyError, match=r"missing keys \['heads\.lm\.bias'\].*blocks\.9\.scale"):
        Tiny().load_state_dict(state)
    with pytest.raises(KeyError, match="missing"):
        Tiny(layers=3).load_state_dict(Tiny(layers=2).state_dict())


class Counter(Module):  # a layer with a buffer, as BatchNorm2d keeps its running statistics
    def __init__(self):
        self.linear = Linear(2, 2)
        self.register_buffer("seen", np.zeros(2, dtype=np.float32))

    def forward(self, x):
        self.seen += 1.0  # learned from the data, not by gradients
        return self.linear(x)


def test_buffers_are_saved_and_loaded_but_are_not_parameters():
    np.random.seed(3)
    source = Sequential(Linear(2, 2), Counter())
    for _ in range(3):
        source(np.ones((1, 2), dtype=np.float32))
    assert [name for name, _ in source.named_buffers()] == ["layers.1.seen"]
    assert len(source.parameters()) == 4  # the optimizer never sees a buffer
    state = source.state_dict()
    assert list(state)[-1] == "layers.1.seen"
    np.testing.assert_array_equal(state["layers.1.seen"], [3.0, 3.0])
    state["layers.1.seen"][...] = -1.0  # a copy: changing it leaves the model alone
    np.testing.assert_array_equal(source[1].seen, [3.0, 3.0])

    target = Sequential(Linear(2, 2), Counter())
    held = target[1].seen
    target.load_state_dict(source.state_dict())
    assert target[1].seen is held and held.dtype == np.float32  # restored in place
    np.testing.assert_array_equal(held, [3.0, 3.0])


def test_load_state_dict_checks_buffers_like_parameters():
    state = Sequential(Counter()).state_dict()
    with pytest.raises(KeyError, match=r"missing keys \['layers\.0\.seen'\]"):
        Sequential(Counter()).load_state_dict({k: v for k, v in state.items() if "seen" not in k})
    with pytest.raises(ShapeError, match=r"layers\.0\.seen.*\(3,\).*\(2,\)"):
        Sequential(Counter()).load_state_dict({**state, "layers.0.seen": np.zeros(3)})
    shared = Counter()
    assert [name for name, _ in Sequential(shared, shared).named_buffers()] == ["layers.0.seen"]
