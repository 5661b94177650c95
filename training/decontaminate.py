"""Drop from a phrasebook file written for the project the pairs that match a held-out phrase: the same words (the
corpus's key) or a near copy (sentence chrF >= NEAR against a held-out phrase of three words or more, either side).
Held out: every alternative of the phrases people type first and both everyday sets. Usage:
`python -m training.decontaminate written.tsv training/phrasebook_x.tsv` (prints what it dropped, as counts)."""

from __future__ import annotations

import argparse
from pathlib import Path

import sacrebleu

from training.common import everyday_held_out, read_tsv, write_lines
from training.corpus import key

NEAR = 75.0  # sentence chrF from which a pair reads as a copy of a held-out phrase


def clean(pairs: list[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], int, int]:
    """The pairs that match no held-out phrase, and how many matched one exactly and nearly."""
    held = everyday_held_out()
    keys, long = {key(h) for h in held}, [h for h in held if len(h.split()) >= 3]
    kept, exact, near = [], 0, 0
    for pair in pairs:
        if any(key(side) in keys for side in pair):
            exact += 1
        elif any(sacrebleu.sentence_chrf(side, [h]).score >= NEAR for side in pair for h in long):
            near += 1
        else:
            kept.append(pair)
    return kept, exact, near


def main() -> None:
    """Write the kept pairs of a written file."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("written", type=Path)
    p.add_argument("out", type=Path)
    args = p.parse_args()
    pairs = [pair for pair in read_tsv(args.written) if len(pair) == 2 and all(s.strip() for s in pair)]
    kept, exact, near = clean(pairs)
    write_lines(args.out, ["\t".join(pair) for pair in kept])
    print(f"{args.written}: {len(pairs)} pairs, {exact} held out exactly, {near} nearly, {len(kept)} kept")


if __name__ == "__main__":
    main()
