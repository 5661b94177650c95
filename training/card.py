"""Write model/builtin/en-es/MODEL_CARD.md from the template, the training history and the evaluation scores."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from model.loading.checkpoint import load
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request
from training.common import WORK

TEMPLATE = Path(__file__).resolve().parent / "MODEL_CARD.template.md"
HISTORY = Path(__file__).resolve().parent / "history.md"  # hand-written: phases, steps, hardware


def latency_ms(model_dir: Path, text: str = "Where is the station?", runs: int = 20) -> float:
    """Median wall time of one greedy translation of a short sentence on one thread (steady under other load)."""
    torch.set_num_threads(1)
    ck = load(model_dir)
    times = []
    ids = ck.languages.prefix("en", "es") + ck.tokenizer.encode(text)
    with torch.inference_mode():
        for _ in range(runs + 3):
            t0 = time.perf_counter()
            generate(ck.model, [Request(0, ids, DecodeParams(max_new_tokens=64))])
            times.append(time.perf_counter() - t0)
    return 1000 * sorted(times[3:])[runs // 2]


ROWS = (  # label, beam size of the scores, whose translations
    ("Apertium eng-spa 0.8.1 (the teacher)", 1, "teacher"),
    ("this model, greedy (the server's default)", 1, "student"),
    ("this model, beam 4", 4, "student"),
)


def score_rows(scores: dict[int, dict]) -> str:
    """Markdown rows of BLEU and chrF on both test sets: the teacher, this model greedy and with beam 4."""
    lines = []
    for label, beam, who in ROWS:
        cells = [f"{scores[beam][name][who][m]:.2f}" for name in ("handbook", "everyday") for m in ("bleu", "chrf")]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


TWOWAY = (  # label, scores file (training.twoway --model DIR --beam N writes work/twoway.<DIR name>.beamN.json)
    ("the previous built-in model (en→es only), greedy", "twoway.baseline.beam1.json"),
    ("this model, greedy (the server's default)", "twoway.{name}.beam1.json"),
    ("this model, beam 4", "twoway.{name}.beam4.json"),
)
SETS = ("first", "everyday", "everyday2")  # training.twoway's held-out phrase sets, both ways
COLUMNS = (*(f"{s} {d}" for s in SETS for d in ("en-es", "es-en")), "handbook-dev en-es")


def twoway_rows(name: str) -> str:
    """Markdown rows: chrF (and % of phrases under 40 chrF) both ways on the phrase sets, Handbook dev chrF."""
    lines = []
    for label, pattern in TWOWAY:
        path = WORK / pattern.format(name=name)
        if not path.exists():
            continue
        got = json.loads(path.read_text())
        cells = [f"{got[c]['chrf']:.1f} ({got[c]['below40']:.0f}%)" if c in got else "not served" for c in COLUMNS]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def still_wrong(name: str) -> str:
    """Markdown list of the held-out phrases under 40 chrF with greedy decoding, both ways (`training.twoway`'s)."""
    path = WORK / f"twoway.{name}.beam1.json"
    got = json.loads(path.read_text()) if path.exists() else {}
    out = []
    for key, result in got.items():
        if isinstance(result, dict) and not key.startswith("handbook"):
            direction = key.split()[1].replace("-", "→")
            out += [f"- {direction} `{src}` → `{hyp}` (reference `{ref}`)" for src, hyp, ref, _ in result["low"]]
    return "\n".join(out) or "- none"


def main() -> None:
    """Fill the template's fields and write the card next to the exported weights."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--history", type=Path, default=HISTORY, help="how the weights were trained (markdown)")
    args = p.parse_args()
    model = load(args.model).model
    cfg = model.cfg
    scores = {b: json.loads((WORK / f"scores.beam{b}.json").read_text()) for b in (1, 4)}
    fields = {
        "encoder_layers": cfg.encoder_layers,
        "decoder_layers": cfg.decoder_layers,
        "d_model": cfg.d_model,
        "heads": cfg.n_heads,
        "ffn": cfg.d_ff,
        "params": f"{sum(p.numel() for p in model.parameters()):,}",
        "size_mb": f"{(args.model / 'model.safetensors').stat().st_size / 1e6:.1f}",
        "latency": f'{latency_ms(args.model):.0f} ms for "Where is the station?" (median, 1 thread)',
        "training": args.history.read_text(encoding="utf-8").strip() + "\n",
        "test_n": f"{scores[1]['handbook']['sentences']:,}",
        "everyday_n": scores[1]["everyday"]["sentences"],
        "score_rows": score_rows(scores),
        "twoway_rows": twoway_rows(args.model.name),
        "still_wrong": still_wrong(args.model.name),
    }
    (args.model / "MODEL_CARD.md").write_text(TEMPLATE.read_text(encoding="utf-8").format(**fields), encoding="utf-8")
    print(f"wrote {args.model / 'MODEL_CARD.md'}")


if __name__ == "__main__":
    main()
