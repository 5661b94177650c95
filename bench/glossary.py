"""Glossaries enforced in the decoder, measured: term exact-match rate and chrF with and without the glossary through
the real server (the built-in en-es model, the whole term test set in POSTs of 64 texts, and an OPUS-MT-shaped
random Marian for the term rate), and the cost on CPU (offline, one interleaved run): a batch in which a quarter of
the requests carry 2 terms against the same batch without, and a request without terms in it against itself alone.

    python -m bench.glossary build   # (re)make bench/data/glossary_terms.tsv (needs debian-handbook, freedict)
    python -m bench.glossary         # measure, print and write the section of docs/benchmarks.md
    python -m bench.glossary cost    # the cost alone (offline), printed
    python -m bench.glossary quality [--beam N] [--set eval|check|short|twoword] [--split test]
                                     # offline: how well the outputs with terms read (bench/glossary_quality.py)

The term test set: sentences of the held-out everyday phrases and Debian Handbook test pairs whose reference uses a
FreeDict translation of a source word that the built-in model does not produce unaided (greedy, default settings):
1 to 3 terms each, one target per source word across the set, so one glossary serves the whole set."""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import random
import re
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import httpx
import sacrebleu
import torch

from app.engine.threads import core_environment
from app.glossaries.lexicon import lexicon
from bench import glossary_quality as gq
from bench import marian
from bench.harness.server import ServerProcess
from bench.machine import machine_info, machine_line
from bench.report import DOC, command, log, write_section

ROOT = Path(__file__).resolve().parents[1]
TERMS = ROOT / "bench" / "data" / "glossary_terms.tsv"
BUILTIN = ROOT / "model" / "builtin" / "en-es"
SECTION = "## Glossaries enforced in the decoder (bench/glossary.py)"
WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def freedict(path: Path = Path("/usr/share/dictd/freedict-eng-spa.dict.dz")) -> dict[str, list[str]]:
    """English headword -> its one-word Spanish translations, from FreeDict's dictd file."""
    from training.dictionary import entries

    out: dict[str, list[str]] = {}
    for head, senses in entries(gzip.decompress(path.read_bytes()).decode("utf-8", "replace")):
        words = [s.strip().lower() for s in senses if WORD.fullmatch(s.strip())]
        if words and " " not in head:
            out.setdefault(head, []).extend(w for w in words if w not in out.get(head, []))
    return out


def words(text: str) -> set[str]:
    """The lower-case words of a text."""
    return {w.lower() for w in WORD.findall(text)}


def candidates(limit: int, seed: int) -> list[tuple[str, str]]:
    """Held-out pairs (English, Spanish reference): the everyday phrases and a sample of the Handbook test pairs."""
    everyday = [tuple(line.split("\t")[:2]) for line in (ROOT / "training" / "everyday.tsv").read_text().splitlines()]
    work = ROOT / "training" / "work"
    en, es = (work / "test.en").read_text().splitlines(), (work / "test.es").read_text().splitlines()
    handbook = list(zip(en, es, strict=True))
    random.Random(seed).shuffle(handbook)
    return [p for p in everyday if len(p) == 2] + handbook[: max(0, limit - len(everyday))]


def build(limit: int, seed: int, want: int) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """Sentences with 1-3 terms each: a source word whose dictionary translation is a word of the reference and not
    of the model's unaided output; one target per source word across the set."""
    from model.loading.checkpoint import load
    from model.runner.generate import generate
    from model.runner.params import DecodeParams
    from model.runner.search import Request

    dictionary, ck = freedict(), load(BUILTIN)
    pairs = candidates(limit, seed)
    with torch.inference_mode():
        params = DecodeParams(max_new_tokens=128)
        reqs = [Request(i, ck.tokenizer.encode(en), params) for i, (en, _) in enumerate(pairs)]
        outs = [ck.tokenizer.decode(h[0].tokens) for h in generate(ck.model, reqs)]
    chosen: dict[str, str] = {}
    found = []
    for (en, ref), out in zip(pairs, outs, strict=True):
        ref_words, out_words, terms = words(ref), words(out), []
        for w in sorted(words(en), key=len, reverse=True):
            if len(w) < 4:
                continue
            options = [chosen[w]] if w in chosen else dictionary.get(w, [])
            v = next((v for v in options if v in ref_words and v not in out_words and len(v) >= 4), None)
            if v is not None and v not in {t for _, t in terms}:
                terms.append((w, v))
            if len(terms) == 3:
                break
        if terms:
            chosen.update(terms)
            found.append((en, ref, terms))
        if len(found) == want:
            break
    return found


def read_terms(path: Path = TERMS) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """The term test set: (English, reference, [(source word, target word)])."""
    rows = []
    for line in path.read_text().splitlines():
        en, ref, terms = line.split("\t")
        rows.append((en, ref, [tuple(t.split("=", 1)) for t in terms.split("|")]))
    return rows


def write_terms(rows: list[tuple[str, str, list[tuple[str, str]]]], path: Path = TERMS) -> None:
    """The term test set as TSV: English, reference, terms as word=target joined by |."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{en}\t{ref}\t{'|'.join(f'{a}={b}' for a, b in t)}\n" for en, ref, t in rows))


def translate(url: str, texts: list[str], glossary: dict[str, str] | None, per_post: int = 64, beam: int = 1) -> dict:
    """Every text, greedy as the server's default (or beam `beam`), with the inline glossary when given: POSTs of
    `per_post` texts (the server's max_items), sent together; their answers joined."""
    def post(chunk: list[str]) -> dict:
        body = {"q": chunk, "source": "en", "target": "es", "parameters": {"max_new_tokens": 128, "beam_size": beam}}
        if glossary:
            body["glossary"] = glossary
        r = httpx.post(f"{url}/translate", json=body, timeout=1800)
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {r.text[:500]}")
        return r.json()

    with ThreadPoolExecutor(1) as pool:  # one POST at a time: the queue holds 256 waiting units
        answers = list(pool.map(post, [texts[i : i + per_post] for i in range(0, len(texts), per_post)]))
    details = [d for a in answers for d in (a["details"] if isinstance(a["details"], list) else [a["details"]])]
    return {"translatedText": [t for a in answers for t in a["translatedText"]], "details": details}


def term_rate(answer: dict) -> tuple[int, int]:
    """(terms applied, terms matched) from the answer's details.glossary."""
    found = [e for d in answer["details"] for e in d.get("glossary", [])]
    return sum(bool(e["applied"]) for e in found), len(found)


def spellable(model: Path, rows) -> set[str]:
    """The targets the model's vocabulary spells (as the server checks them): the others are refused (422)."""
    from model.loading.checkpoint import load

    tok = load(model).tokenizer
    return {v for _, _, terms in rows for _, v in terms if all(map(tok.spells, v))}


def served(model: Path, rows, glossary: dict[str, str], workdir: Path) -> dict:
    """Outputs, chrF and term rates without and with the glossary, through a real server of `model` (the set's
    terms counted, and sent, where the model's vocabulary spells them)."""
    spelled = spellable(model, rows)
    server = ServerProcess("--model", str(model), log=workdir / f"{model.name}.log").wait(timeout=300)
    try:
        texts, refs = [en for en, _, _ in rows], [ref for _, ref, _ in rows]
        out = {}
        writable = {w: v for w, v in glossary.items() if v in spelled}  # the server refuses the others by name
        for name, g in (("without", None), ("with", writable)):
            start = time.perf_counter()
            answer = translate(server.url, texts, g)
            hyps = answer["translatedText"]
            pairs = [(h, v) for h, (_, _, terms) in zip(hyps, rows, strict=True) for _, v in terms if v in spelled]
            applied, total = sum(v in h for h, v in pairs), len(pairs)
            out[name] = {
                "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score, "set_terms": (applied, total),
                "matched": term_rate(answer) if g else None, "seconds": time.perf_counter() - start,
                "unspelled": sum(len(t) for _, _, t in rows) - total,
            }  # fmt: skip
        return out
    finally:
        server.stop()


def core_cost(rows, rounds: int, beam: int) -> dict:
    """`cost` in a process started as the launcher starts an engine core: its OpenMP settings (read when torch loads),
    torch's huge pages and its host allocator."""
    core_environment()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(cost, rows, rounds, beam).result()


def cost(rows, rounds: int, beam: int) -> dict:
    """Offline, one process, interleaved: tokens/s of a batch of the set's sentences (beam `beam`, with the server's
    defaults: no scores asked, confidence on) in which every fourth carries 2 terms, against the same batch without
    terms; and whether a request without terms in it gets its output alone."""
    from app.glossaries.apply import GlossaryUse
    from model.loading.checkpoint import load
    from model.runner.constraints import Words
    from model.runner.generate import generate
    from model.runner.host_memory import keep_freed_memory
    from model.runner.params import DecodeParams
    from model.runner.search import Request

    keep_freed_memory()  # the host allocator as the engine's process sets it
    ck, torch_threads = load(BUILTIN), torch.get_num_threads()
    two = [(en, terms[:2]) for en, _, terms in rows if len(terms) >= 2]
    batch = (two * 4)[:16] + [(en, []) for en, _, _ in rows][:48]
    random.Random(0).shuffle(batch)
    plain = DecodeParams(beam_size=beam, max_new_tokens=128, return_scores=False, confidence=True)

    tok = ck.tokenizer
    words = Words.of(tok.target_pieces(ck.config.tgt_vocab_size), ck.model.device)

    def requests(with_terms: bool) -> list:
        out = []
        for i, (en, terms) in enumerate(batch):
            cons, chars = GlossaryUse(tuple(terms), tok.encode_target, 7).constraints(en) if with_terms else ((), [])
            spans = tuple(tok.source_spans(en, chars, lead=1))  # as the planner places them
            out.append(Request(i, tok.encode(en), plain.constrained(cons, spans=spans)))
        return out

    times = {True: [], False: []}
    with torch.inference_mode():
        results = {}
        for with_terms in (True, False):  # untimed: a process's first batches pay for its allocations and packing
            generate(ck.model, requests(with_terms), words=words)
        for k in range(rounds):
            for with_terms in (k % 2 == 0, k % 2 == 1):
                reqs = requests(with_terms)
                start, cpu = time.perf_counter(), time.process_time()
                got = generate(ck.model, reqs, words=words)
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu
                times[with_terms].append((wall, cpu, sum(len(h[0].tokens) + 1 for h in got)))
                results[with_terms] = got
        lone = next(i for i, (_, terms) in enumerate(batch) if not terms)
        alone = generate(ck.model, [requests(True)[lone]], words=words)[0]
    tps = {w: sum(n for _, _, n in v) / sum(s for s, _, _ in v) for w, v in times.items()}  # wall: what users wait
    cpu = {w: sum(n for _, _, n in v) / sum(c for _, c, _ in v) for w, v in times.items()}  # CPU time, both threads
    same = [h.tokens for h in alone] == [h.tokens for h in results[True][lone]]
    return {"tps_with": tps[True], "tps_without": tps[False], "ratio": tps[True] / tps[False], "alone_equal": same,
            "cpu_ratio": cpu[True] / cpu[False],
            "constrained": sum(bool(t) for _, t in batch), "batch": len(batch), "threads": torch_threads,
            "rows_with": sum(r.params.beam_size for r in requests(True)), "rows_without": beam * len(batch),
            "beam": beam}  # fmt: skip


def term_outputs(rows: list[gq.Row], beam: int, workdir: Path, url: str | None = None) -> tuple[list[str], list[str]]:
    """Through a real server of the built-in model (translation cache off; or the one at `url`, e.g. another tree's):
    (outputs with the set's one glossary, plain outputs) of the rows, in POSTs of 64 texts, greedy as the server's
    default or beam `beam` (raised where terms need it): matching, do-not-translate spans, sentence splitting and
    placement as a user gets them."""
    server = None if url else ServerProcess("--model", str(BUILTIN), "--no-cache", log=workdir / "quality.log")
    try:
        url = url or server.wait(timeout=300).url
        texts, glossary = [r.english for r in rows], gq.glossary(rows)
        with_terms = translate(url, texts, glossary, beam=beam)["translatedText"]
        return with_terms, translate(url, texts, None, beam=beam)["translatedText"]
    finally:
        if server is not None:
            server.stop()


def quality(args) -> int:
    """Translate a set's sentences plain and with their terms, print the metrics and sample outputs, keep the
    outputs as JSON (`python -m bench.glossary_quality FILE` scores them again)."""
    split = args.split or ("test" if args.set == "eval" else args.set)  # the other sets are one split each, named so
    rows = gq.read(gq.SETS[args.set], None if split == "all" else split)
    start = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    outputs, plain = term_outputs(rows, args.beam, args.workdir, args.url)
    seconds = time.perf_counter() - start
    summary = gq.evaluate(rows, outputs, plain)
    name = f"{args.set}/{split}, beam {args.beam}"
    analyser = lexicon("es")
    print(f"## {name}: {len(rows)} sentences, {seconds:.1f} s; Spanish genders from "
          f"{analyser.path if analyser else 'the model and word endings (no analyser installed)'}\n")  # fmt: skip
    print(gq.table({name: summary}))
    step = max(1, len(rows) // args.samples) if args.samples else 0
    if step:
        print("\n| english | plain | with terms | flags |\n|---|---|---|---|")
        for s in summary["sentences"][::step][: args.samples]:
            flags = [k for k in ("after_end", "appended", "beside", "kept", "determiner", "chrf_drop") if s[k]]
            flags += [f"broken {w}" for w in s["broken"]] + ([] if s["all_exact"] else ["term missing"])
            print(f"| {s['english']} | {s['plain']} | {s['output']} | {', '.join(flags) or 'ok'} |")
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"quality-{args.set}-{split}-beam{args.beam}.json"
    path.write_text(json.dumps({"outputs": outputs, "plain": plain}, ensure_ascii=False, indent=1), encoding="utf-8")
    log(f"outputs -> {path}")
    return 0


def render(info: dict, rows, builtin: dict, opus: dict, costs: list[dict], args) -> str:
    """The markdown section."""
    n_terms = sum(len(t) for _, _, t in rows)
    pct = lambda a, b: f"{a}/{b} ({100 * a / b:.1f}%)" if b else "-"  # noqa: E731
    lines = [
        SECTION, "", f"Generated by `{command('bench.glossary')}` on {info['date']}.", "", machine_line(info),
        f"- Term test set: `bench/data/glossary_terms.tsv`, {len(rows)} sentences (held-out everyday phrases and "
        f"Debian Handbook test pairs), {n_terms} terms (1-3 per sentence), one glossary of "
        f"{len({w for _, _, t in rows for w, _ in t})} entries sent inline with every POST (64 texts each) "
        "(greedy as the server's default; with the glossary the server raises the beam to what the constraints need).",
        "- Term rate: the set's target appears in the output, exactly as written; 'matched' counts every entry the "
        "server matched in the texts (`details.glossary`), applied when its target is in the output.", "",
        f"- The OPUS-MT-shaped model's vocabulary cannot spell {opus['with']['unspelled']} of the terms (accented "
        "letters): they are left out of its glossary and its rate (the server refuses a target it cannot write).", "",
        "| model | glossary | set's terms in the output | matched entries applied | chrF | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for name, res in (("built-in en-es", builtin), ("OPUS-MT-shaped random Marian", opus)):
        for which in ("without", "with"):
            r = res[which]
            chrf = f"{r['chrf']:.2f}" if name.startswith("built-in") else "(random weights)"
            matched = pct(*r["matched"]) if r["matched"] else "-"
            lines.append(f"| {name} | {which} | {pct(*r['set_terms'])} | {matched} | {chrf} | {r['seconds']:.1f} |")
    lines += [
        "", f"Cost (offline, built-in model, {costs[0]['threads']} thread(s), wall clock, {args.rounds} interleaved "
        f"rounds): a batch of {costs[0]['batch']} of the set's sentences, {costs[0]['constrained']} of them with 2 "
        "terms, against the same batch without terms (target >= 0.85x):", "",
        "| requests | rows with terms / without | tokens/s with terms | without | ratio | by CPU time | a request "
        "without terms in the batch = alone |", "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for c in costs:
        name = "greedy (the built-in model's default)" if c["beam"] == 1 else f"beam {c['beam']} (OPUS-MT's default)"
        lines.append(f"| {name} | {c['rows_with']} / {c['rows_without']} | {c['tps_with']:.0f} | "
                     f"{c['tps_without']:.0f} | **{c['ratio']:.2f}x** | {c['cpu_ratio']:.2f}x | "
                     f"{'yes' if c['alone_equal'] else '**no**'} |")
    lines += ["", "A greedy request with terms decodes with beam search (a place for every stage of its terms: "
              "`constrained_beam`): its batch runs more rows, which is most of the greedy cost; at beam 4 the rows "
              "are nearly the same and the ratio is mostly the constraint work itself. On a CPU the greedy "
              "ratio is mostly those rows, whose step time grows with them: a constrained request decodes with a beam "
              "of at least 4 (the words before a term keep alternatives: 'La foto' at 4, 'El foto' at 3), so 16 "
              "greedy requests with terms take 4 rows each and 64 rows become 113; the constraint work itself is "
              "5-9% of the constrained batch's time (on a GPU, where a step's time hardly depends on its rows at "
              "these sizes, the rows cost little).", "",
              "The OPUS-MT-shaped model's misses are its toy vocabulary's: it has no capital letters, so the server "
              "keeps a capital as it is and translates the text around it, and a term next to one (\"Breakfast\", "
              "\"This\") is matched in the text but cut from the unit the decoder sees.", ""]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Build the set, or measure it."""
    p = argparse.ArgumentParser(prog="python -m bench.glossary", description=__doc__.split("\n\n")[0])
    p.add_argument("what", nargs="?", choices=["build", "measure", "quality", "cost"], default="measure")
    p.add_argument("--beam", type=int, default=1, help="quality: beam size (1: greedy, as the server's default)")
    p.add_argument("--set", choices=list(gq.SETS), default="eval", help="quality: which set (eval)")
    p.add_argument("--split", default=None, help="quality: dev, test, check or all (test; check for the check set)")
    p.add_argument("--samples", type=int, default=20, help="quality: sample outputs printed (20)")
    p.add_argument("--url", help="quality: a running server to measure (another tree's) instead of starting one")
    p.add_argument("--candidates", type=int, default=1500, help="pairs tried when building (1500)")
    p.add_argument("--sentences", type=int, default=240, help="sentences in the set when building (240)")
    p.add_argument("--rounds", type=int, default=4, help="rounds of the cost measurement (4)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/bench-glossary"))
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    if args.what == "quality":
        return quality(args)
    if args.what == "build":
        rows = build(args.candidates, 7, args.sentences)
        write_terms(rows)
        log(f"{len(rows)} sentences, {sum(len(t) for _, _, t in rows)} terms -> {TERMS}")
        return 0
    rows = read_terms()
    if args.what == "cost":  # the cost alone, printed
        for c in (core_cost(rows, args.rounds, beam) for beam in (1, 4)):
            print(f"beam {c['beam']}: rows {c['rows_with']} / {c['rows_without']}, {c['tps_with']:.0f} / "
                  f"{c['tps_without']:.0f} tokens/s, ratio {c['ratio']:.2f}x (CPU time {c['cpu_ratio']:.2f}x), "
                  f"alone equal {c['alone_equal']}")
        return 0
    glossary = {w: v for _, _, terms in rows for w, v in terms}
    args.workdir.mkdir(parents=True, exist_ok=True)
    builtin = served(BUILTIN, rows, glossary, args.workdir)
    opus_dir = args.workdir / "opus-mt-en-es"
    if not (opus_dir / "model.safetensors").exists():
        marian.write(opus_dir, marian.CPU, 0)
    opus = served(opus_dir, rows, glossary, args.workdir)
    costs = [core_cost(rows, args.rounds, beam) for beam in (1, 4)]
    section = render(machine_info(), rows, builtin, opus, costs, args)
    print(section)
    if not args.no_write:
        write_section(DOC, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
