"""Markup that costs nothing (issue 48), through a real server of the built-in model (cache off): HTML snippets with
inline elements translated with format "html" beside the plain translation of their text without tags.

Reports: tags kept exactly (each snippet's tags, byte for byte, each once, nested); the output with its tags stripped
against the plain translation of the stripped source (corpus chrF, lowest sentence chrF); tags around the right words
(the output equal to the Spanish judged by hand, whitespace aside) on the test half and the check set; cost (HTML
request time over plain request time, same texts, interleaved rounds).

    python -m bench.markup [--set test|check|dev|all] [--samples 20] [--rounds 3]

bench/data/markup_eval.tsv: 170 snippets. `test` (55) and `check` (30, written and judged after the placement rules
were frozen) carry `expected`: the built-in model's own translation (CPU, float32, greedy) with each tag where a
reader puts it, judged by hand (a tag around a word the translation dropped goes around nothing). `dev` (85): no
expected; the smoothing of app.inline_words was designed on failures seen in dev and test.
"""

from __future__ import annotations

import argparse
import csv
import html
import re
import time
from pathlib import Path

import httpx
import sacrebleu

from app.settings import BUILTIN
from bench.harness.server import ServerProcess
from bench.report import log

DATA = Path(__file__).resolve().parent / "data" / "markup_eval.tsv"
TAG = re.compile(r"<[^<>]+>")


def read_rows(path: Path = DATA) -> list[dict]:
    """The set's rows: set (dev, test, check), html, expected (the Spanish judged by hand; dev: empty)."""
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def strip(markup: str) -> str:
    """The text without tags, as a reader sees it (a line break parts two words)."""
    text = re.sub(r"(\S)<(?:br|x)\b[^<>]*>(\S)", r"\1 \2", markup)
    return " ".join(html.unescape(TAG.sub("", text)).split())


def tags_exact(source: str, output: str) -> bool:
    """Every tag of the source in the output, byte for byte, as many times, and the output's tags nested."""
    if sorted(TAG.findall(source)) != sorted(TAG.findall(output)):
        return False
    stack = []
    for tag in TAG.findall(output):
        name = re.match(r"</?\s*([\w:-]+)", tag).group(1)
        if tag.startswith("</"):
            if not stack or stack.pop() != name:
                return False
        elif not tag.endswith("/>") and name not in ("br", "img", "wbr"):
            stack.append(name)
    return not stack


def normal(markup: str) -> str:
    """Markup with its whitespace collapsed (and none beside a line break), to compare placements."""
    return re.sub(r"\s*(<br\s*/?>)\s*", r"\1", " ".join(markup.split()))


def post(client: httpx.Client, url: str, texts: list[str], fmt: str) -> tuple[list[str], float]:
    """Each text's translation (one request per text, in turn) and the seconds they took together."""
    out, start = [], time.perf_counter()
    for text in texts:
        r = client.post(url + "/translate", json={"q": text, "source": "en", "target": "es", "format": fmt})
        r.raise_for_status()
        out.append(r.json()["translatedText"])
    return out, time.perf_counter() - start


def measure(rows: list[dict], url: str, rounds: int) -> dict:
    """Outputs, plain translations and timings of the rows."""
    sources = [r["html"] for r in rows]
    plains = [strip(s) for s in sources]
    with httpx.Client(timeout=120) as client:
        outputs, _ = post(client, url, sources, "html")
        plain_out, _ = post(client, url, plains, "text")
        times = {"html": 0.0, "text": 0.0}
        for r in range(rounds):  # each snippet both ways in turn (the order alternating): noise hits both alike
            for pair in zip(sources, plains, strict=True):
                for fmt, text in (("html", pair[0]), ("text", pair[1]))[:: 1 if r % 2 else -1]:
                    times[fmt] += post(client, url, [text], fmt)[1]
    return {"outputs": outputs, "plain": plain_out, "times": times}


def report(rows: list[dict], got: dict, samples: int) -> dict:
    """The numbers of one set, printed with sample outputs side by side."""
    outs, plains = got["outputs"], got["plain"]
    stripped = [strip(o) for o in outs]
    exact = sum(tags_exact(r["html"], o) for r, o in zip(rows, outs, strict=True))
    chrf = sacrebleu.corpus_chrf(stripped, [plains]).score
    each = [sacrebleu.sentence_chrf(s, [p]).score for s, p in zip(stripped, plains, strict=True)]
    judged = [(r, o) for r, o in zip(rows, outs, strict=True) if r["expected"]]
    right = sum(normal(o) == normal(r["expected"]) for r, o in judged)
    out = {
        "snippets": len(rows),
        "tags_exact": exact / len(rows),
        "chrf_stripped_vs_plain": chrf,
        "lowest_sentence_chrf": min(each),
        "placed_right": right / len(judged) if judged else None,
        "judged": len(judged),
        "cost_ratio": got["times"]["html"] / got["times"]["text"] if got["times"]["text"] else None,
    }
    for r, o, p in list(zip(rows, outs, plains, strict=True))[:samples]:
        mark = "" if not r["expected"] else ("  ok" if normal(o) == normal(r["expected"]) else "  WRONG")
        print(f"{r['html']}\n  -> {o}{mark}\n  plain: {p}")
        if mark == "  WRONG":
            print(f"  expected: {r['expected']}")
    for r, o in judged:
        if normal(o) != normal(r["expected"]) and r not in rows[:samples]:
            print(f"WRONG {r['html']}\n  -> {o}\n  expected: {r['expected']}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Serve the built-in model, translate the set both ways, print the numbers."""
    p = argparse.ArgumentParser(prog="python -m bench.markup", description=__doc__.split("\n\n")[0])
    p.add_argument("--set", choices=["dev", "test", "check", "all"], default="all")
    p.add_argument("--samples", type=int, default=20, help="sample outputs printed per set (20)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds of the cost measurement (3)")
    p.add_argument("--url", default=None, help="a running server instead of a fresh one")
    args = p.parse_args(argv)
    rows = read_rows()
    server = None
    if args.url is None:
        server = ServerProcess("--model", str(BUILTIN), "--no-cache", log=Path("/tmp/bench-markup.log"))
        server.wait(timeout=300)
    try:
        url = args.url or server.url
        for name in ("test", "check", "dev") if args.set == "all" else (args.set,):
            chosen = [r for r in rows if r["set"] == name]
            log(f"== {name}: {len(chosen)} snippets")
            numbers = report(chosen, measure(chosen, url, args.rounds), args.samples)
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in numbers.items()))
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
