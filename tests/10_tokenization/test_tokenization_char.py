"""CharTokenizer: round trips, the unknown-character policy both ways, save/load."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.text.tokenization import CharTokenizer


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_round_trip_on_its_own_text(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert len(ids) == len(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert tok.vocab_size == len(set(text))


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1), st.data())
def test_round_trip_of_any_text_over_the_vocabulary(vocab_text, data):
    tok = CharTokenizer.from_text(vocab_text)
    text = data.draw(st.text(alphabet=sorted(set(vocab_text))))
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(np.array(tok.encode(text))) == text


def test_ids_follow_sorted_characters():
    tok = CharTokenizer.from_text("banana bread")
    assert tok.vocab == sorted(set("banana bread"))
    assert [tok.vocab[i] for i in tok.encode("bread")] == list("bread")
    assert tok.encode_array("nab").dtype == np.int64


def test_unknown_character_raises_naming_it_by_default():
    tok = CharTokenizer.from_text("abc")
    assert tok.encode("cab") == [2, 0, 1]
    with pytest.raises(ValueError, match=r"'z'.*position 2.*unk=True"):
        tok.encode("abz")
    with pytest.raises(ValueError, match="U\\+732B"):
        tok.encode("猫")


def test_unknown_character_maps_to_reserved_id_when_asked():
    tok = CharTokenizer.from_text("abc", unk=True)
    assert tok.vocab_size == 4 and tok.vocab[0] == "<unk>"
    assert tok.encode("azb!") == [1, 0, 2, 0]
    assert tok.decode(tok.encode("azb")) == "a\ufffdb"
    assert tok.decode(tok.encode("cab")) == "cab"


def test_decode_rejects_ids_outside_the_vocabulary():
    tok = CharTokenizer.from_text("abc")
    assert tok.decode([]) == ""
    assert tok.decode(np.array([2.0, 0.0], dtype=np.float32)) == "ca"  # e.g. Tensor data
    with pytest.raises(ValueError, match="token id 3 is out of range"):
        tok.decode([0, 3])
    with pytest.raises(ValueError, match="token id -1"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="str"):
        tok.encode(b"abc")


@pytest.mark.parametrize("unk", [False, True])
def test_save_load_round_trip(tmp_path, unk):
    text = "To be, or not to be: 猫 🙂\n"
    tok = CharTokenizer.from_text(text, unk=unk)
    path = tmp_path / "chars.json"
    tok.save(path)
    loaded = CharTokenizer.load(path)
    assert loaded.vocab == tok.vocab and loaded.unk == unk
    assert loaded.encode(text) == tok.encode(text)
    assert loaded.decode(tok.encode(text)) == text


def test_load_reports_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read tokenizer file"):
        CharTokenizer.load(bad)
    with pytest.raises(ValueError, match="cannot read tokenizer file"):
        CharTokenizer.load(tmp_path / "missing.json")
    other = tmp_path / "other.json"
    other.write_text('{"type": "bpe", "merges": []}')
    with pytest.raises(ValueError, match="not a saved char tokenizer"):
        CharTokenizer.load(other)
    assert CharTokenizer.from_text("ab").decode([1, 0]) == "ba"
