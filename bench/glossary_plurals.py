"""Singular glossary entries on texts that hold their plurals, through a real server of the built-in model.

    python -m bench.glossary_plurals [--url URL]

Set: `bench/data/glossary_plurals.tsv` (30 hand-written sentences, each with its own glossary of singular entries and
the forms the output should hold). Reports: the wanted forms standing as whole words, a singular determiner right
before a plural form ("la imágenes"), chrF against the references with the glossary and without it, and every
output beside the plain one."""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import sacrebleu

from app.glossaries.apply import whole_words
from bench.glossary import BUILTIN, translate
from bench.harness.server import ServerProcess

SET = Path(__file__).resolve().parent / "data" / "glossary_plurals.tsv"
SINGULAR = {"el", "la", "un", "una", "del", "al", "este", "esta", "ese", "esa", "aquel", "aquella", "cada", "otro",
            "otra", "mucho", "mucha", "poco", "poca", "nuestro", "nuestra", "vuestro", "vuestra"}  # fmt: skip


def read(path: Path = SET) -> list[tuple[str, str, dict[str, str], list[str]]]:
    """(english, reference, glossary, wanted forms) per sentence."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            en, ref, entries, forms = line.split("\t")
            rows.append((en, ref, dict(e.split("=") for e in entries.split("|")), forms.split("|")))
    return rows


def singular_before(output: str, form: str) -> bool:
    """A singular determiner right before the form ("la imágenes")."""
    return any(m.group(1).lower() in SINGULAR for m in re.finditer(rf"(\w+)\s+{re.escape(form)}(?!\w)", output))


def main(argv: list[str] | None = None) -> int:
    """Translate the set with and without each sentence's glossary and print the numbers and the outputs."""
    p = argparse.ArgumentParser(prog="python -m bench.glossary_plurals", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a running server to measure instead of starting one")
    args = p.parse_args(argv)
    rows = read()
    server = None
    if not args.url:
        log = Path(tempfile.mkdtemp()) / "server.log"
        server = ServerProcess("--model", str(BUILTIN), "--no-cache", log=log)
    try:
        url = args.url or server.wait(timeout=300).url
        outs = [translate(url, [en], glossary)["translatedText"][0] for en, _, glossary, _ in rows]
        plain = translate(url, [en for en, *_ in rows], None)["translatedText"]
    finally:
        if server is not None:
            server.stop()
    wanted = [(out, f) for out, (*_, forms) in zip(outs, rows, strict=True) for f in forms]
    held = sum(whole_words(f, out) for out, f in wanted)
    plurals = [[f for f in forms if f not in glossary.values()] for _, _, glossary, forms in rows]
    wrong = sum(any(singular_before(out, f) for f in forms) for out, forms in zip(outs, plurals, strict=True))
    refs = [[r for _, r, _, _ in rows]]
    share = 100 * held / len(wanted)
    print(f"{len(rows)} sentences, {len(wanted)} wanted forms: held as whole words {held} ({share:.1f}%); "
          f"sentences with a singular determiner before a plural form {wrong}; chrF with the glossary "
          f"{sacrebleu.corpus_chrf(outs, refs).score:.1f}, without {sacrebleu.corpus_chrf(plain, refs).score:.1f}\n")
    print("| english | glossary | plain | with the glossary |\n|---|---|---|---|")
    for (en, _, glossary, _), out, base in zip(rows, outs, plain, strict=True):
        entries = ", ".join(f"{s} -> {t}" for s, t in glossary.items())
        print(f"| {en} | {entries} | {base} | {out} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
