"""SentencePiece tokenization (shared or separate source/target models) and incremental detokenization."""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"


class Tokenizer:
    """Text <-> token ids. With `vocab` (Marian's or M2M100's vocab.json, NLLB's tokenizer.json), pieces map to ids
    through it; `specials` (language tokens, BOS, mask) never appear in decoded text."""

    def __init__(
        self,
        source: spm.SentencePieceProcessor,
        target: spm.SentencePieceProcessor,
        eos_id: int,
        pad_id: int,
        unk_id: int,
        vocab: dict[str, int] | None = None,
        specials: frozenset[int] = frozenset(),
    ):
        self.source, self.target, self.vocab = source, target, vocab
        self.eos_id, self.pad_id, self.unk_id = eos_id, pad_id, unk_id
        self.specials = {eos_id, pad_id, unk_id, *specials}
        self.pieces = {i: p for p, i in vocab.items()} if vocab else None
        self._spells: dict[str, bool] = {}

    @classmethod
    def from_files(
        cls, source: Path, target: Path | None = None, vocab: Path | dict[str, int] | None = None, **kw
    ) -> Tokenizer:
        """Load SentencePiece model(s) and, for Hugging Face checkpoints, the vocabulary (a vocab.json or a dict)."""
        src = spm.SentencePieceProcessor(model_file=str(source))
        tgt = spm.SentencePieceProcessor(model_file=str(target)) if target else src
        mapping = json.loads(Path(vocab).read_text(encoding="utf-8")) if isinstance(vocab, (str, Path)) else vocab
        if mapping is not None:
            kw.setdefault("eos_id", mapping["</s>"])
            kw.setdefault("unk_id", mapping["<unk>"])
            kw.setdefault("pad_id", mapping["<pad>"])
        return cls(src, tgt, vocab=mapping, **kw)

    def encode(self, text: str) -> list[int]:
        """Source ids with EOS appended; a leading `>>xx<<` target-language code stays one token (Marian)."""
        if self.vocab is None:
            return self.source.encode(text) + [self.eos_id]
        code = self._code(text)
        pieces = ([code] if code else []) + self.source.encode(text[len(code) :], out_type=str)
        return [self.vocab.get(p, self.unk_id) for p in pieces] + [self.eos_id]

    def _code(self, text: str) -> str:
        """A leading `>>xx<<` target-language code that `encode` keeps as one token (Marian), else ""."""
        if self.vocab is not None and text.startswith(">>") and (end := text.find("<<")) != -1:
            return text[: end + 2]
        return ""

    def encode_target(self, text: str) -> list[int]:
        """Target ids of `text` as the decoder emits it inside a sentence, after a space (SentencePiece's word-initial
        pieces), without EOS: a glossary term's constraint."""
        if self.vocab is None:
            return self.target.encode(text)
        return [self.vocab.get(p, self.unk_id) for p in self.target.encode(text, out_type=str)]

    def target_pieces(self, size: int) -> list[str]:
        """Every target id's piece up to `size` ids ("" for special tokens and ids without one)."""
        return self._pieces(self.target, size)

    def source_pieces(self, size: int) -> list[str]:
        """Every source id's piece up to `size` ids ("" for special tokens and ids without one)."""
        return self._pieces(self.source, size)

    def _pieces(self, sp: spm.SentencePieceProcessor, size: int) -> list[str]:
        """Every id's piece of `sp` (or of the shared vocabulary) up to `size` ids, "" for special ones."""
        if self.pieces is not None:
            pieces = [self.pieces.get(i, "") for i in range(size)]
        else:
            n = sp.get_piece_size()
            pieces = [sp.id_to_piece(i) if i < n and not sp.is_control(i) else "" for i in range(size)]
        return ["" if i in self.specials else p for i, p in enumerate(pieces)]

    def source_spans(self, text: str, spans: list[tuple[int, int]], lead: int = 0) -> list[tuple[int, int, int]]:
        """For each character span [start, end) of `text`: the first of `encode(text)`'s tokens from `lead` words
        before it (a glossary term's window opens where the decoder reaches the word before it), and the tokens
        [start, end) that cover the span itself."""
        code = self._code(text)
        offset, rest = int(bool(code)), text[len(code) :]  # the code's token comes first
        pieces = self.source.encode(rest, return_type="proto").pieces
        starts = [k for k, p in enumerate(pieces) if p.piece.startswith(SPIECE_UNDERLINE)]
        out = []
        for a, b in spans:
            a, b = (len(rest[: max(0, k - len(code))].encode("utf-8")) for k in (a, b))
            inside = [k for k, p in enumerate(pieces) if p.begin < b and p.end > a] or [0]
            if inside[0] > 0 and pieces[inside[0] - 1].piece == SPIECE_UNDERLINE:  # the word's lone start: "▁|s|mar|t"
                inside.insert(0, inside[0] - 1)
            before = [k for k in starts if k <= inside[0]]
            first = before[max(0, len(before) - 1 - lead)] if before else inside[0]
            out.append((offset + first, offset + inside[0], offset + inside[-1] + 1))
        return out

    def spells(self, char: str) -> bool:
        """Whether both vocabularies have pieces for `char` that decode back to it: emoji, rare symbols and control
        characters that map to <unk> or vanish in normalization do not (whitespace counts as spelled; a vocabulary
        with byte-fallback pieces spells everything it does not normalize away)."""
        if char.isspace():
            return True
        known = self._spells.get(char)
        if known is None:
            known = self._spells[char] = all(self._round_trips(sp, char) for sp in {self.source, self.target})
        return known

    def _round_trips(self, sp: spm.SentencePieceProcessor, char: str) -> bool:
        """`char` encodes to known pieces of `sp` (through the vocab when there is one) and decodes to itself."""
        pieces = sp.encode(char, out_type=str)
        if self.vocab is not None:
            known = all(p in self.vocab for p in pieces)
        else:
            known = all(sp.piece_to_id(p) != sp.unk_id() for p in pieces)
        return known and sp.decode_pieces(pieces).strip() == char

    def decode(self, ids: list[int]) -> str:
        """Target ids to text, special tokens dropped."""
        ids = [i for i in ids if i not in self.specials]
        if self.pieces is None:
            return self.target.decode(ids)
        text = self.target.decode_pieces([self.pieces.get(i, "") for i in ids])
        return text.replace(SPIECE_UNDERLINE, " ").strip()

    def detokenizer(self) -> IncrementalDetokenizer:
        """A fresh streaming detokenizer for one output."""
        return IncrementalDetokenizer(self)


class IncrementalDetokenizer:
    """Turns a growing id sequence into clean text deltas: no broken characters, no lost spaces. A push decodes a
    short window only (the ids of the last delta and those after it), never the whole output again."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""
        self.start = self.read = 0  # window start; ids before `read` are in `text`

    def push(self, token_id: int) -> str:
        """Add one id; return the new text it completes (empty while a character is incomplete)."""
        self.ids.append(token_id)
        seen = self.tokenizer.decode(self.ids[self.start : self.read])
        now = self.tokenizer.decode(self.ids[self.start :])
        if len(now) <= len(seen) or not now.startswith(seen) or now.endswith("\ufffd"):
            return ""
        delta = now[len(seen) :]
        if delta.strip():  # a window must not start with whitespace-only pieces: decode would drop their spaces
            self.start = self.read
        self.read, self.text = len(self.ids), self.text + delta
        return delta

    def flush(self) -> str:
        """Whatever is still held back once the output is finished (checked against the whole decode)."""
        text = self.tokenizer.decode(self.ids)
        if not text.startswith(self.text):
            return ""
        delta, self.text = text[len(self.text) :], text
        return delta
