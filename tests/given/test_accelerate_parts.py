"""The given `accelerate` (tinytorch/accel/accelerate.py): which layers it swaps, how `plain`
undoes it, which parts a student's completed lessons allow. Swapping runs no kernel; the numbers
of an accelerated model are module 18's tests (tests/18_acceleration)."""

import numpy as np
import pytest

from tinytorch.accel.accelerate import PARTS, accelerate, accelerated, parts_for, plain
from tinytorch.core.attention import MultiHeadAttention
from tinytorch.core.optimizers import SGD, AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.models.transformer import GPT
from tinytorch.nn import LayerNorm


def small_gpt(seed=0):
    np.random.seed(seed)
    return GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)


def test_layers_stay_instances_of_their_classes_and_plain_undoes_it():
    model = accelerate(small_gpt())
    block = model.blocks[0]
    assert isinstance(block.attention, MultiHeadAttention) and isinstance(block.ln1, LayerNorm)
    assert type(block.attention).__name__ == "MultiHeadAttention"
    assert accelerate(model) is model and accelerated(model) == set(PARTS) - {"adamw"}
    assert type(type(block.ln1).lesson_class) is type  # accelerated twice: one subclass deep
    assert type(block.ln1).lesson_class is LayerNorm
    plain(model)
    assert accelerated(model) == set() and type(block.attention) is MultiHeadAttention


def test_parts_choose_what_is_swapped_and_unknown_parts_are_named():
    model = accelerate(small_gpt(), parts=("layernorm",))
    assert accelerated(model) == {"layernorm"}
    assert type(model.blocks[0].attention) is MultiHeadAttention
    with pytest.raises(ValueError, match="unknown part.*'attention', "):
        accelerate(model, parts=("atention",))
    with pytest.raises(TypeError, match="needs a Module or an optimizer"):
        accelerate(lambda x: x)


def test_parts_for_never_speeds_a_completed_lesson_with_code_the_student_did_not_write():
    assert parts_for(set()) == PARTS  # a fresh clone: every lesson is the reference
    assert parts_for(range(1, 14)) == ()  # modules 01-13 the student's own, 18 the reference's
    assert parts_for({12}) == ("gelu", "adamw", "embedding", "layernorm")
    assert parts_for({*range(1, 14), 18}) == PARTS  # the fast code is the student's too


def test_an_optimizer_accelerate_does_not_know_is_left_as_it_is():
    sgd = SGD([Tensor(np.ones(2), requires_grad=True)], lr=0.1)
    assert accelerate(sgd) is sgd and type(sgd) is SGD and accelerated(sgd) == set()
    adam = accelerate(AdamW([Tensor(np.ones(2), requires_grad=True)]), parts=("attention",))
    assert type(adam) is AdamW


def test_embeddings_are_accelerated_and_learned_positions_keep_their_own_forward(rng):
    from tinytorch.core.embeddings import LearnedPositionalEncoding

    np.random.seed(4)
    table = LearnedPositionalEncoding(6, 4)
    x = Tensor(rng.normal(size=(2, 3, 4)))
    before = table(x, offset=2).data
    accelerate(table)
    np.testing.assert_array_equal(table(x, offset=2).data, before)
    assert accelerated(table) == set()  # a subclass of Embedding with its own forward: untouched
    model = small_gpt(5)
    accelerate(model, ["embedding"])
    assert accelerated(model) == {"embedding"}
    assert type(model.token_embedding).accelerated_by.__name__ == "FastEmbedding"


def test_an_accelerated_model_and_optimizer_pickle_and_train_on_alike(rng):
    import pickle

    from tinytorch.core.losses import cross_entropy

    model = accelerate(small_gpt(), workers=1)
    opt = accelerate(AdamW(model.parameters(), lr=1e-2))
    runs = [(model, opt)]
    x, y = rng.integers(0, 17, (3, 8)), rng.integers(0, 17, (3, 8))
    cross_entropy(model(Tensor(x)), y).backward()
    opt.step()  # moments to carry over
    runs.append(pickle.loads(pickle.dumps((model, opt))))
    loaded_model, loaded_opt = runs[1]
    assert accelerated(loaded_model) == accelerated(model) and type(loaded_opt) is type(opt)
    assert loaded_opt.params[0] is loaded_model.parameters()[0]  # one object, as pickled
    for m, o in runs:
        o.zero_grad()
        cross_entropy(m(Tensor(x)), y).backward()
        o.step()
    for a, b in zip(model.parameters(), loaded_model.parameters()):
        np.testing.assert_array_equal(a.data, b.data)
