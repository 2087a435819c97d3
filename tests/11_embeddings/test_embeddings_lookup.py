"""Embedding: lookup values, scatter-add gradient, id validation, PyTorch parity."""

import numpy as np
import oracle
import pytest
from fdcheck import check_function, check_graph

from tinytorch.core.embeddings import Embedding, EmbeddingLookup
from tinytorch.core.tensor import Tensor, precision
from tinytorch.text.embeddings import Embedding as TextEmbedding


def test_both_import_paths_name_the_same_class():
    assert Embedding is TextEmbedding


def test_lookup_function_gradient_with_repeated_ids():
    rng = np.random.default_rng(0)
    ids = np.array([[2, 0, 2], [4, 2, 1]])  # id 2 three times, id 3 never
    check_function(EmbeddingLookup, rng.standard_normal((5, 4)), kwargs={"ids": ids})


def test_embedding_graph_gradient_through_module():
    ids = np.array([[1, 1, 3], [0, 3, 3]])

    def build(weight):
        emb = Embedding(4, 3)
        emb.weight = weight
        return emb(ids) * emb(ids[:, ::-1])  # the same table used twice in one graph

    check_graph(build, np.random.default_rng(1).standard_normal((4, 3)))


def test_forward_and_gradient_match_torch():
    # torch.nn.functional.embedding on the same table, ids and upstream gradient
    case = oracle.load(__file__).case("lookup")
    emb = Embedding(50, 16)
    emb.weight.data[...] = case["weight"]
    out = emb(case["ids"])
    (out * Tensor(case["upstream"])).sum().backward()
    assert out.dtype == np.float32 and emb.weight.grad.dtype == np.float32
    np.testing.assert_array_equal(out.data, case["out"])
    np.testing.assert_allclose(emb.weight.grad, case["grad"], atol=1e-5)


def test_unused_rows_get_zero_gradient_and_empty_batch_works():
    emb = Embedding(6, 2)
    emb(np.array([1, 4])).sum().backward()
    assert np.all(emb.weight.grad[[0, 2, 3, 5]] == 0)
    np.testing.assert_array_equal(emb.weight.grad[[1, 4]], np.ones((2, 2)))
    emb.zero_grad()
    out = emb(np.zeros((2, 0), dtype=int))
    assert out.shape == (2, 0, 2)
    out.sum().backward()
    np.testing.assert_array_equal(emb.weight.grad, np.zeros((6, 2)))


@pytest.mark.parametrize(
    "ids", [[[1, 2], [3, 0]], np.array([[1, 2], [3, 0]]), Tensor([[1.0, 2.0], [3.0, 0.0]])]
)
def test_ids_as_list_array_or_tensor(ids):
    emb = Embedding(4, 5)
    out = emb(ids)
    np.testing.assert_array_equal(out.data, emb.weight.data[[[1, 2], [3, 0]]])


@pytest.mark.parametrize(
    "ids, named",
    [
        ([0, 12], ["12", "10"]),
        (np.array([[3, -1]]), ["-1", "10"]),
        (Tensor([2.0, 2.5]), ["2.5"]),
        ([1.0, float("nan")], ["nan"]),
    ],
)
def test_bad_ids_name_the_value_and_vocabulary(ids, named):
    with pytest.raises(ValueError) as err:
        Embedding(10, 3)(ids)
    message = str(err.value)
    assert "\n" not in message
    for text in named:
        assert text in message


def test_non_numeric_ids_are_a_type_error():
    with pytest.raises(TypeError, match="integers"):
        Embedding(10, 3)(["a", "b"])
    with pytest.raises(TypeError, match="integers"):
        Embedding(10, 3)(np.array([True, False]))


@pytest.mark.parametrize("args", [(0, 4), (4, -1), (3.5, 2), (True, 2)])
def test_bad_sizes_are_rejected(args):
    with pytest.raises(ValueError, match="positive integer"):
        Embedding(*args)


def test_init_is_normal_with_std_002_and_float32():
    np.random.seed(0)
    emb = Embedding(400, 100)
    assert emb.weight.dtype == np.float32 and emb.weight.requires_grad
    assert abs(emb.weight.data.std() - 0.02) < 0.0005 and abs(emb.weight.data.mean()) < 0.0005
    assert [name for name, _ in emb.named_parameters()] == ["weight"]


def test_float64_under_precision():
    with precision(np.float64):
        emb = Embedding(3, 2)
        assert emb(np.array([0, 2])).dtype == np.float64


def test_the_course_page_spelling_with_keywords():
    emb = Embedding(vocab_size=10, embed_dim=4)
    assert emb.weight.shape == (10, 4) and (emb.num_embeddings, emb.embedding_dim) == (10, 4)
    with pytest.raises(ValueError, match="vocab_size"):
        Embedding(vocab_size=0, embed_dim=4)
