"""SentencePiece tokenizer and the incremental detokenizer."""

from model.checkpoint import load

TEXTS = ["the cat runs", "¿qué? niño über café", "日本 — naïve", "hello   world  "]


def test_encode_appends_eos_and_decode_inverts(native_dir):
    tok = load(native_dir).tokenizer
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids[-1] == tok.eos_id
        assert tok.decode(ids) == " ".join(text.split())


def test_incremental_deltas_concatenate_to_the_full_text(native_dir, marian_dir):
    for tok in (load(native_dir).tokenizer, load(marian_dir).tokenizer):
        for text in TEXTS:
            ids = tok.encode(text)[:-1]
            detok = tok.detokenizer()
            deltas = [detok.push(i) for i in ids] + [detok.flush()]
            assert "".join(deltas) == tok.decode(ids)
            assert all("\ufffd" not in d for d in deltas)


def test_byte_fallback_characters_are_never_split(native_dir):
    tok = load(native_dir).tokenizer
    ids = tok.encode("한국")[:-1]
    pieces = [tok.target.id_to_piece(i) for i in ids]
    assert any(p.startswith("<0x") for p in pieces)  # multi-byte characters arrive as several byte pieces
    detok = tok.detokenizer()
    deltas = [detok.push(i) for i in ids]
    assert "".join(deltas) + detok.flush() == "한국"
    assert all("\ufffd" not in d for d in deltas) and "" in deltas  # held back mid-character
