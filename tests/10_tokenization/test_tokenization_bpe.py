"""BPETokenizer: exact round trips on any Unicode, merges compress, order, save/load, speed."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.text.tokenization import BPETokenizer, count_pairs, merge

REPETITIVE = "the quick brown fox jumps over the lazy dog. " * 40 + "the fox, the dog. " * 40


@pytest.fixture(scope="module")
def trained():
    return BPETokenizer().train(REPETITIVE, vocab_size=280)


def random_corpus(size, seed=0):
    """Words drawn from a fixed random vocabulary, so pair counts are skewed like real text."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=rng.integers(2, 9))) for _ in range(600)]
    return " ".join(rng.choice(words, size=size // 4))[:size]


def reference_merge(ids, pair, new_id):
    """Left-to-right scan: the definition the vectorised merge must match."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=40), st.integers(0, 3), st.integers(0, 3))
def test_merge_matches_a_left_to_right_scan(ids, a, b):
    got = merge(np.array(ids, dtype=np.int64), (a, b), 9)
    assert got.tolist() == reference_merge(ids, (a, b), 9)


def test_count_pairs_ignores_separators_and_breaks_ties_by_smallest_pair():
    ids = np.array([5, 6, 5, 6, -1, 6, 5, 7, 7, 7, 7])
    assert count_pairs(ids, base=10) == ((7, 7), 3)
    assert count_pairs(np.array([1, 2, -1, 2, 1]), base=10) == ((1, 2), 1)
    assert count_pairs(np.array([3, -1, 4]), base=10) == (None, 0)


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_round_trip_on_arbitrary_unicode(trained, text):
    ids = trained.encode(text)
    assert all(0 <= i < trained.vocab_size for i in ids)
    assert trained.decode(ids) == text


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_training_on_arbitrary_text_round_trips(text):
    tok = BPETokenizer().train(text, vocab_size=280)
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize(
    "text",
    ["emoji 🙂👍🏽 and flags 🇫🇷", "日本語のテキスト、猫と犬", "zażółć gęślą jaźń", "\n\t  \0 x"],
)
def test_round_trip_on_unseen_scripts(trained, text):
    assert trained.decode(trained.encode(text)) == text


def test_merges_shorten_repetitive_text_and_fill_the_vocabulary(trained):
    assert len(trained.merges) == 280 - 256 == trained.vocab_size - 256
    n_bytes = len(REPETITIVE.encode("utf-8"))
    assert len(trained.encode(REPETITIVE)) < n_bytes / 2
    assert len(trained.encode("the quick brown fox")) < len("the quick brown fox")
    for k, (a, b) in enumerate(trained.merges):  # each merge builds on earlier ids only
        assert a < 256 + k and b < 256 + k
        assert trained.vocab[256 + k] == trained.vocab[a] + trained.vocab[b]
    assert b"the" in trained.vocab and b" fox" in trained.vocab


def test_first_merge_is_the_most_frequent_pair():
    tok = BPETokenizer().train("abababab cdcd", vocab_size=257)
    assert tok.merges == [(ord("a"), ord("b"))]
    assert tok.encode("abab") == [256, 256]
    assert tok.decode([256, ord("c")]) == "abc"


def test_merges_are_applied_in_the_order_learned(trained):
    text = "the lazy fox jumps over the dog"
    ids = list(text.encode("utf-8"))
    pieces = []  # apply merges in order inside each chunk, with the slow reference merge
    for chunk in ["the", " lazy", " fox", " jumps", " over", " the", " dog"]:
        chunk_ids = list(chunk.encode("utf-8"))
        for k, pair in enumerate(trained.merges):
            chunk_ids = reference_merge(chunk_ids, pair, 256 + k)
        pieces += chunk_ids
    assert trained.encode(text) == pieces
    assert len(pieces) < len(ids)


def test_merges_do_not_cross_word_boundaries():
    tok = BPETokenizer().train("ab ab ab ab ab ab", vocab_size=400)
    assert all(b" " not in piece[1:] for piece in tok.vocab[256:])
    assert len(tok.merges) < 400 - 256  # the text runs out of repeated pairs


def test_save_load_round_trip(tmp_path, trained):
    path = tmp_path / "bpe.json"
    trained.save(path)
    loaded = BPETokenizer.load(path)
    assert loaded.merges == trained.merges and loaded.vocab == trained.vocab
    sample = "the lazy 🙂 dog"
    assert loaded.encode(sample) == trained.encode(sample)
    assert loaded.decode(trained.encode(sample)) == sample


def test_a_cut_multibyte_character_decodes_to_a_replacement(trained):
    """A sampling model can stop, or put a token, in the middle of a UTF-8 character: decode
    shows U+FFFD there (as the lesson says) and the rest of the text as it is, never raising."""
    euro = list("€".encode())  # three bytes
    cut = BPETokenizer().decode([*b"ab", *euro[:2], *b"cd"])
    assert cut.startswith("ab") and cut.endswith("cd") and "\ufffd" in cut
    assert set(BPETokenizer().decode(euro[1:])) == {"\ufffd"}  # continuation bytes alone
    ids = trained.encode("the dog 🙂")
    assert set(trained.decode(ids[:-1])[len("the dog ") :]) == {"\ufffd"}  # 4 bytes, cut short


def test_bad_input_gives_clear_errors(tmp_path, trained):
    assert trained.decode(trained.encode("ok")) == "ok"
    with pytest.raises(ValueError, match="at least 256"):
        BPETokenizer().train("abc", vocab_size=100)
    with pytest.raises(ValueError, match="out of range"):
        trained.decode([trained.vocab_size])
    with pytest.raises(ValueError, match="not valid Unicode"):
        trained.encode("bad \ud800 surrogate")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"type": "bpe", "merges": [[999, 1]]}')
    with pytest.raises(ValueError, match="does not exist yet"):
        BPETokenizer.load(corrupt)


def test_training_is_fast_on_50kb():
    text = random_corpus(50_000)
    start = time.perf_counter()
    tok = BPETokenizer().train(text, vocab_size=456)
    elapsed = time.perf_counter() - start
    assert len(tok.merges) == 200
    assert elapsed < 5.0, f"200 merges on 50 KB took {elapsed:.1f}s"
    assert tok.decode(tok.encode(text)) == text
