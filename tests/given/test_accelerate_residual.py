"""accelerate's transformer block: a training residual sum writes into its branch's array
(`SumIntoBranch`), so the graph keeps the sum and not the branch before it; the values and
gradients are the lesson's, and a branch someone else can still see is left as it was."""

import numpy as np
import pytest

from tinytorch.accel.accelerate import SumIntoBranch, accelerate, plain
from tinytorch.core.autograd import no_grad
from tinytorch.core.hooks import Listener, listen
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Add, Tensor
from tinytorch.models.transformer import GPT, TransformerBlock


def gpt(**kwargs):
    np.random.seed(0)
    return GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10, **kwargs)


def block_sums(model, x):
    """The nodes of each block's two residual sums, from the last block's output backwards."""
    out = Tensor(x)
    for block in model.blocks:
        out = block(out)
    nodes, t = [], out
    for _ in range(2 * len(model.blocks)):
        nodes.append(t._ctx)
        t = t._ctx.parents[0]  # the residual stream before this sum
    return out, nodes


def test_each_training_sum_is_written_into_its_branch(rng):
    model = accelerate(gpt(), workers=1)
    out, nodes = block_sums(model, rng.standard_normal((2, 8, 16)).astype(np.float32))
    assert [type(n) for n in nodes] == [SumIntoBranch] * 4
    assert all(type(b).lesson_class is TransformerBlock for b in model.blocks)
    assert np.shares_memory(nodes[0].parents[1].data, out.data)
    for node in nodes:
        assert node.parents[1].data is not node.parents[0].data


def test_values_and_gradients_are_the_lessons(rng):
    x, y = rng.integers(0, 17, (3, 8)), rng.integers(0, 17, (3, 8))
    results = []
    lesson_blocks = accelerate(gpt(), workers=1)
    for block in lesson_blocks.blocks:  # the same fast layers, the lesson's block around them
        block.__class__ = type(block).lesson_class
    for model in (lesson_blocks, accelerate(gpt(), workers=1)):
        loss = cross_entropy(model(Tensor(x)), y)
        loss.backward()
        results.append((loss.data, [p.grad for p in model.parameters()]))
    (loss0, grads0), (loss1, grads1) = results
    np.testing.assert_array_equal(loss0, loss1)  # the same sums, in the same order
    for a, b in zip(grads0, grads1):
        np.testing.assert_array_equal(a, b)


def test_a_branch_someone_holds_keeps_its_values(rng):
    model = accelerate(gpt(), workers=1)
    kept = []
    out_proj = model.blocks[1].attention.out_proj  # the attention layer itself stays the lesson's

    def keeping(x):
        out = type(out_proj).forward(out_proj, x)
        kept.append((out, out.data.copy()))
        return out

    out_proj.forward = keeping
    out, nodes = block_sums(model, rng.standard_normal((2, 8, 16)).astype(np.float32))
    branch, values = kept[0]
    np.testing.assert_array_equal(branch.data, values)  # not overwritten by the sum
    assert [type(n) for n in nodes] == [SumIntoBranch, Add, SumIntoBranch, SumIntoBranch]


def test_a_layer_with_a_forward_of_its_own_keeps_its_branch(rng):
    model = accelerate(gpt(), workers=1)
    mlp = model.blocks[0].mlp
    mlp.forward = lambda x: type(mlp).forward(mlp, x)  # may keep what it returns
    _, nodes = block_sums(model, rng.standard_normal((2, 8, 16)).astype(np.float32))
    assert [type(n) for n in nodes] == [SumIntoBranch, SumIntoBranch, Add, SumIntoBranch]


@pytest.mark.parametrize("case", ["listener", "no_grad", "post-norm", "plain"])
def test_the_lessons_sum_where_the_branch_may_be_seen(rng, case):
    model = accelerate(gpt(norm_first=case != "post-norm"), workers=1)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    if case == "plain":
        plain(model)
    if case == "no_grad":
        with no_grad():
            out = model.blocks[1](model.blocks[0](Tensor(x)))
        assert out._ctx is None
        return
    if case == "listener":  # a listener's `exit` may keep a layer's output
        with listen(Listener()):
            out, nodes = block_sums(model, x)
    else:
        out, nodes = block_sums(model, x)
    assert SumIntoBranch not in {type(n) for n in nodes}
