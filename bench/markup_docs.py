"""Document runs and inline codes that cost nothing (issue 48): the snippets of bench/data/markup_eval.tsv as a .docx
(each inline element a bold run) and an XLIFF 1.2 file (each element a <g> code, each line break an <x/>), through
/translate_file of a real server of the built-in model: runs and codes kept, and each paragraph's text (runs and
codes ignored) against the plain translation of its text (corpus chrF, lowest sentence chrF).

    python -m bench.markup_docs [--url URL]
"""

from __future__ import annotations

import argparse
import io
import re
import tempfile
from pathlib import Path

import docx
import httpx
import sacrebleu
from lxml import etree

from app.settings import BUILTIN
from bench.harness.server import ServerProcess
from bench.markup import read_rows, strip

PART = re.compile(r"(<[^<>]+>)")
XLIFF = '<?xml version="1.0" encoding="UTF-8"?>\n<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2">'
XLIFF += '<file source-language="en" target-language="es" datatype="plaintext" original="x">'
XLIFF += "<body>{}</body></file></xliff>"


def runs(markup: str) -> list[tuple[str, bool]]:
    """A snippet's text as runs: inside any inline element bold (block tags dropped, a line break a space)."""
    out, depth = [], 0
    for part in PART.split(re.sub(r"<br\s*/?>", " ", markup)):
        if part.startswith("<"):
            name = re.match(r"</?(\w+)", part).group(1)
            if name not in ("p", "li", "td", "div"):
                depth += -1 if part.startswith("</") else 1
        elif part:
            out.append((part, depth > 0))
    return out


def word_file(rows: list[dict]) -> bytes:
    """One paragraph per snippet."""
    doc = docx.Document()
    for row in rows:
        para = doc.add_paragraph()
        for text, bold in runs(row["html"]):
            para.add_run(text).bold = bold or None
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


def xliff_file(rows: list[dict]) -> bytes:
    """One trans-unit per snippet: inline elements as <g>, line breaks as <x/>, block tags dropped."""
    units = []
    for i, row in enumerate(rows):
        source, n = "", 0
        for part in PART.split(row["html"]):
            if not part.startswith("<"):
                source += part.replace("&", "&amp;").replace("<", "&lt;") if "&" not in part else part
            elif re.match(r"<br", part):
                n += 1
                source += f'<x id="{n}"/>'
            elif not re.match(r"</?(p|li|td|div)\b", part):
                n += not part.startswith("</")
                source += "</g>" if part.startswith("</") else f'<g id="{n}">'
        units.append(f'<trans-unit id="{i}"><source>{source}</source></trans-unit>')
    return XLIFF.format("".join(units)).encode()


def translate_file(url: str, name: str, data: bytes) -> bytes:
    """POST /translate_file, then download the translation."""
    form = {"source": "en", "target": "es"}
    r = httpx.post(url + "/translate_file", files={"file": (name, data)}, data=form, timeout=600)
    r.raise_for_status()
    return httpx.get(r.json()["translatedFileUrl"], timeout=60).content


def plain(url: str, texts: list[str]) -> list[str]:
    """/translate of each text (sentences split, as documents are)."""
    out = []
    for start in range(0, len(texts), 20):  # within max_items
        body = {"q": texts[start : start + 20], "source": "en", "target": "es", "parameters": {"split_sentences": True}}
        r = httpx.post(url + "/translate", json=body, timeout=600)
        r.raise_for_status()
        out += r.json()["translatedText"]
    return out


def score(name: str, got: list[str], want: list[str], kept: int, total: int, shown: int = 10) -> None:
    """Print one format's numbers and its `shown` lowest paragraphs."""
    got, want = [" ".join(g.split()) for g in got], [" ".join(w.split()) for w in want]
    each = [sacrebleu.sentence_chrf(g, [w]).score for g, w in zip(got, want, strict=True)]
    chrf = sacrebleu.corpus_chrf(got, [want]).score
    print(f"{name}: {len(got)} paragraphs, formatting kept {kept}/{total}, chrF vs plain {chrf:.1f}, "
          f"lowest {min(each):.1f}, equal {sum(g == w for g, w in zip(got, want, strict=True))}")  # fmt: skip
    differ = [(g, w, c) for g, w, c in zip(got, want, each, strict=True) if g != w]
    for g, w, c in sorted(differ, key=lambda x: x[2])[:shown]:
        if g != w:
            print(f"  {c:5.1f} {g}\n        plain: {w}")


def main(argv: list[str] | None = None) -> int:
    """Serve the built-in model, translate the set as a .docx and an .xlf, print the numbers."""
    p = argparse.ArgumentParser(prog="python -m bench.markup_docs", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=None, help="a running server (with --files-dir) instead of a fresh one")
    args = p.parse_args(argv)
    rows = read_rows()
    server = None
    if args.url is None:
        files = tempfile.mkdtemp(prefix="bench-markup-")
        server = ServerProcess("--model", str(BUILTIN), "--files-dir", files, log=Path("/tmp/bench-markup-docs.log"))
        server.wait(timeout=300)
    try:
        url = args.url or server.url
        texts = [strip(r["html"]) for r in rows]
        want = plain(url, texts)
        out = docx.Document(io.BytesIO(translate_file(url, "set.docx", word_file(rows)))).paragraphs
        bold = [[bool(b) for _, b in runs(r["html"])] for r in rows]
        kept = sum(b == [bool(x.bold) for x in o.runs] for b, o in zip(bold, out, strict=True))
        score("docx", [o.text for o in out], want, kept, len(rows))
        root = etree.fromstring(translate_file(url, "set.xlf", xliff_file(rows)))
        ns = {"x": root.nsmap[None]}
        units = root.findall(".//x:trans-unit", ns)
        same = sum(
            [e.tag for e in u.find("x:source", ns).iter()][1:] == [e.tag for e in u.find("x:target", ns).iter()][1:]
            for u in units
        )
        targets = [strip(etree.tostring(u.find("x:target", ns), encoding=str)) for u in units]
        score("xliff", targets, want, same, len(units))
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
