"""Stage 10: score the Apertium teacher on the held-out test set into work/teacher_scores.json."""

import json
import time

import sacrebleu

from training.common import WORK, read_lines, write_lines
from training.distill import MARK, apertium


def main() -> None:
    """Translate test.en with Apertium (unknown-word marks removed) and score BLEU/chrF against test.es."""
    start = time.time()
    sources, references = read_lines(WORK / "test.en"), read_lines(WORK / "test.es")
    hypotheses = [MARK.sub("", h) for h in apertium(sources)]
    write_lines(WORK / "test.apertium.es", hypotheses)
    bleu_metric, chrf_metric = sacrebleu.BLEU(), sacrebleu.CHRF()
    bleu = bleu_metric.corpus_score(hypotheses, [references])
    chrf = chrf_metric.corpus_score(hypotheses, [references])
    scores = {
        "system": "apertium eng-spa (apertium-eng-spa 0.8.1)",
        "test_set": "Debian Handbook en-US/es-ES held-out sentences",
        "sentences": len(sources),
        "bleu": round(bleu.score, 2),
        "chrf": round(chrf.score, 2),
        "bleu_signature": str(bleu_metric.get_signature()),
        "chrf_signature": str(chrf_metric.get_signature()),
    }
    (WORK / "teacher_scores.json").write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")
    print(f"BLEU {bleu.score:.1f}  chrF {chrf.score:.1f}  on {len(sources)} sentences ({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
