"""A 500-segment docx through POST /translate_file against one POST /translate of the same 500 texts (a list), on
the built-in model, in one server, interleaved and repeated. Target: the file within 1.3x of the list.

    python -m bench.documents                   # 500 paragraphs, 3 rounds
    python -m bench.documents --segments 100 --rounds 2
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import statistics
import time

import docx
import httpx

from bench.harness.server import ServerProcess
from bench.machine import cpu_model

ADJ = ["big", "small", "red", "old", "quiet"]
NOUN = ["house", "dog", "car", "book", "garden"]
VERB = ["is near", "is behind", "is next to", "is far from", "was in"]
PLACE = ["the river", "the station", "the school", "the market"]


def texts(n: int) -> list[str]:
    """n distinct English sentences."""
    combos = itertools.product(ADJ, NOUN, VERB, PLACE)
    return [f"The {a} {b} {c} {d}." for (a, b, c, d), _ in zip(combos, range(n), strict=False)]


def document(paragraphs: list[str]) -> bytes:
    """A docx with one paragraph per text."""
    doc = docx.Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def timed(call) -> float:
    """Seconds one call takes (it must answer 200)."""
    start = time.perf_counter()
    r = call()
    assert r.status_code == 200, r.text
    return time.perf_counter() - start


def main() -> None:
    """Run both requests in alternation and print the times and their ratio."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--segments", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    sentences = texts(args.segments)
    data = document(sentences)
    server = ServerProcess("--max-items", str(len(sentences))).wait()  # no translation cache: both reach the engine
    url = server.url
    body = {"q": sentences, "source": "en", "target": "es", "parameters": {"split_sentences": True}}
    as_list = lambda: httpx.post(url + "/translate", json=body, timeout=600)
    form = {"source": "en", "target": "es", "direct": "true"}
    as_file = lambda: httpx.post(url + "/translate_file", files={"file": ("b.docx", data)}, data=form, timeout=600)
    try:
        timed(as_list)  # warm both paths once
        timed(as_file)
        lists, files = [], []
        for _ in range(args.rounds):
            lists.append(timed(as_list))
            files.append(timed(as_file))
    finally:
        server.stop()
    ratios = [f / t for f, t in zip(files, lists, strict=True)]
    print(f"cpu: {cpu_model()} ({os.cpu_count()} cores, shared with other work)")
    print(f"{args.segments} segments, {args.rounds} rounds, built-in model, greedy, CPU")
    print(f"/translate list : median {statistics.median(lists):.2f}s  {[round(t, 2) for t in lists]}")
    print(f"/translate_file : median {statistics.median(files):.2f}s  {[round(t, 2) for t in files]}")
    total = sum(files) / sum(lists)
    print(f"file / list     : median {statistics.median(ratios):.3f}x  {[round(r, 2) for r in ratios]}")
    print(f"sum(file) / sum(list): {total:.3f}x  (target <= 1.3x)")


if __name__ == "__main__":
    main()
