"""SentencePiece tokenizer and the incremental detokenizer."""

import random

from app.settings import BUILTIN
from model.loading.checkpoint import load

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
            assert deltas[-1] == ""  # every complete character was streamed before the end


def test_byte_fallback_characters_are_never_split(native_dir):
    tok = load(native_dir).tokenizer
    ids = tok.encode("한국")[:-1]
    pieces = [tok.target.id_to_piece(i) for i in ids]
    assert any(p.startswith("<0x") for p in pieces)  # multi-byte characters arrive as several byte pieces
    detok = tok.detokenizer()
    deltas = [detok.push(i) for i in ids]
    assert "".join(deltas) + detok.flush() == "한국"
    assert all("\ufffd" not in d for d in deltas) and "" in deltas  # held back mid-character


def test_whitespace_only_pieces_keep_their_spaces(native_dir, marian_dir):
    """A lone "▁" piece followed by a word: decode strips leading spaces of a window's first pieces."""
    for tok in (load(native_dir).tokenizer, load(marian_dir).tokenizer):
        if tok.pieces is None:
            space = tok.target.piece_to_id("▁")
        else:
            space = next(i for i, p in tok.pieces.items() if p == "▁")
        word = tok.encode("cat")[:-1]
        for ids in ([*word, space, *word], [*word, space, space, *word, space], [space, *word]):
            detok = tok.detokenizer()
            deltas = [detok.push(i) for i in ids] + [detok.flush()]
            assert "".join(deltas) == tok.decode(ids), ids


def test_random_id_sequences_stream_to_their_decode(native_dir, marian_dir):
    """Fuzz: any id sequence (byte pieces, lone spaces, unknowns) streams to exactly its full decode."""
    rng = random.Random(0)
    for tok in (load(native_dir).tokenizer, load(marian_dir).tokenizer):
        pool = list(range(tok.target.get_piece_size())) if tok.pieces is None else list(tok.pieces)
        pool += [_space_id(tok)] * (len(pool) // 4)  # lone spaces are rare in the vocabulary, not in outputs
        for _ in range(300):
            ids = [rng.choice(pool) for _ in range(rng.randrange(1, 25))]
            detok = tok.detokenizer()
            deltas = [detok.push(i) for i in ids] + [detok.flush()]
            assert "".join(deltas) == tok.decode(ids), ids


def _space_id(tok) -> int:
    """The id of the lone word-boundary piece "\u2581"."""
    if tok.pieces is None:
        return tok.target.piece_to_id("\u2581")
    return next(i for i, p in tok.pieces.items() if p == "\u2581")


def test_a_terms_source_tokens_include_its_words_lone_start_piece():
    # catches: "smartphone" as "▁|s|mar|t|phon|e" given tokens from "s" on: the decoder's alignment rests on the lone
    # "▁", so the term's own words looked "not looked at" and a retry forced the term at the sentence's start
    tok = load(BUILTIN).tokenizer
    text = "My smartphone fell into the water."
    pieces = tok.source.encode(text, out_type=str)
    assert pieces[1] == "\u2581" and tok.source_spans(text, [(3, 13)], lead=1) == [(0, 1, 7)]
    assert tok.source_spans("The file could not be saved.", [(4, 8)], lead=1) == [(0, 1, 2)]  # "▁file": as before
