"""A glossary's entries from the shapes clients send (TSV or CSV text, an object, a list of pairs), checked: no empty
term, no source term twice with different targets, within the limits. Errors name the entry or the limit."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import msgspec

from app.glossaries.matching import term_key

Entry = tuple[str, str]  # (source term, target term), as written
Labelled = tuple[str, str, str]  # (where the entry was in the input, source, target)
FORMATS = ("tsv", "csv")


class GlossaryError(ValueError):
    """Entries refused: 422 (malformed, empty, conflicting) or 413 (over a limit), the message naming the entry or
    the limit."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.message, self.status = message, status


@dataclass(frozen=True)
class Limits:
    """The server's limits on one glossary (inline, stored, or both merged)."""

    max_entries: int
    max_entry_bytes: int
    max_bytes: int


def parse_text(text: str, fmt: str, field: str) -> list[Labelled]:
    """Entries of TSV (source<TAB>target per line) or CSV (source,target per row; quoted fields as RFC 4180) text;
    blank lines are skipped."""
    if fmt not in FORMATS:
        raise GlossaryError(f"{field}_format: must be one of {', '.join(FORMATS)}, not {fmt!r}")
    lines = text.splitlines()
    if fmt == "tsv":
        rows = [(n, line.split("\t")) for n, line in enumerate(lines, 1) if line.strip()]
    else:
        try:
            reader = csv.reader(io.StringIO(text, newline=""), strict=True)
            rows = [(reader.line_num, row) for row in reader if any(c.strip() for c in row)]
        except csv.Error as exc:
            raise GlossaryError(f"{field}: malformed CSV ({exc})") from None
    out = []
    for n, row in rows:
        if len(row) != 2:
            sep = "tab-separated" if fmt == "tsv" else "comma-separated"
            raise GlossaryError(f"{field} line {n}: expected 2 {sep} fields (source, target), found {len(row)}")
        out.append((f"{field} line {n}", row[0], row[1]))
    return out


def parse_inline(value: object, field: str = "glossary") -> list[Labelled]:
    """Inline entries: an object {"source term": "target term"}, a list of [source, target] pairs, TSV text, or
    either JSON shape as text (a form field)."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            value = msgspec.json.decode(value)
        except msgspec.DecodeError:
            pass  # TSV text that starts with a bracket
    if isinstance(value, str):
        return parse_text(value, "tsv", field)
    if isinstance(value, dict):
        items = [(f"{field}[{k!r}]", k, v) for k, v in value.items()]
    elif isinstance(value, list):
        items = []
        for i, pair in enumerate(value):
            if not (isinstance(pair, list | tuple) and len(pair) == 2):
                raise GlossaryError(f"{field}[{i}]: expected a [source, target] pair")
            items.append((f"{field}[{i}]", *pair))
    else:
        raise GlossaryError(f"{field}: expected an object of terms, a list of [source, target] pairs or TSV text")
    for label, source, target in items:
        if not isinstance(source, str) or not isinstance(target, str):
            raise GlossaryError(f"{label}: terms must be strings")
    return items


def checked(items: list[Labelled], limits: Limits, field: str) -> tuple[Entry, ...]:
    """The entries, terms stripped, duplicates (same source and target) once; GlossaryError for an empty term, a term
    with a tab or line break, a source term twice with different targets, or a limit passed."""
    seen: dict[str, Entry] = {}
    total = 0
    for label, source, target in items:
        source, target = source.strip(), target.strip()
        if not source or not target:
            raise GlossaryError(f"{label}: empty {'source' if not source else 'target'} term")
        if any(c in s for s in (source, target) for c in "\t\r\n"):
            raise GlossaryError(f"{label}: a term must not hold a tab or a line break")
        size = len(source.encode()) + len(target.encode())
        if size > limits.max_entry_bytes:
            raise GlossaryError(f"{label}: {size} bytes exceeds glossary_max_entry_bytes={limits.max_entry_bytes}", 413)
        key = term_key(source)
        if key in seen:
            if seen[key][1] != target:
                raise GlossaryError(f"{label}: source term {source!r} given twice, with targets {seen[key][1]!r} and "
                                    f"{target!r}")  # fmt: skip
            continue
        seen[key] = (source, target)
        total += size
    within(list(seen.values()), limits, field, total)
    return tuple(seen.values())


def within(entries: list[Entry], limits: Limits, field: str, total: int | None = None) -> None:
    """GlossaryError (413) when the entries are more, or more bytes, than the limits allow."""
    if len(entries) > limits.max_entries:
        raise GlossaryError(f"{field}: {len(entries)} entries exceeds glossary_max_entries={limits.max_entries}", 413)
    total = sum(len(s.encode()) + len(t.encode()) for s, t in entries) if total is None else total
    if total > limits.max_bytes:
        raise GlossaryError(f"{field}: {total} bytes of terms exceeds glossary_max_bytes={limits.max_bytes}", 413)


def merged(stored: tuple[Entry, ...], inline: tuple[Entry, ...], limits: Limits) -> tuple[Entry, ...]:
    """A stored glossary's entries with inline ones over them (inline wins on the same source term), within limits."""
    out = {term_key(s): (s, t) for s, t in stored}
    out.update({term_key(s): (s, t) for s, t in inline})
    entries = list(out.values())
    within(entries, limits, "glossary")
    return tuple(entries)


def to_tsv(entries: tuple[Entry, ...]) -> str:
    """The entries as TSV text, one per line."""
    return "".join(f"{s}\t{t}\n" for s, t in entries)
