"""`CharTokenizer()` then `build_vocab(texts)`, the TinyTorch book's spelling of from_text."""

import pytest

from tinytorch.text.tokenization import CharTokenizer


def test_build_vocab_from_several_texts_equals_from_text_of_their_characters():
    texts = ["hello there", "general kenobi\n"]
    tok = CharTokenizer()
    assert tok.build_vocab(texts) is tok
    assert tok.vocab == CharTokenizer.from_text("".join(texts)).vocab
    assert tok.decode(tok.encode("hello kenobi")) == "hello kenobi"
    assert CharTokenizer().build_vocab("abc").vocab == ["a", "b", "c"]


def test_build_vocab_keeps_the_unknown_policy():
    tok = CharTokenizer(unk=True).build_vocab(["ab"])
    assert tok.vocab_size == 3 and tok.decode(tok.encode("abz")).startswith("ab")


def test_build_vocab_of_something_that_is_not_text_is_a_type_error():
    with pytest.raises(TypeError, match="encode takes a str"):
        CharTokenizer().build_vocab([b"bytes"])
