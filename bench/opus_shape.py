"""A random OPUS-MT-shaped Marian checkpoint on disk (tokenizer files included), for serving benchmarks on a GPU.

python -m bench.opus_shape /tmp/opus-mt-en-de   # d_model 512, 6+6, vocab 58101; the pair comes from the name
python -m bench.opus_shape /tmp/opus-mt-en-de --beam-default   # with OPUS-MT's generation config (num_beams 4)
python -m bench.serving --device cuda --model /tmp/opus-mt-en-de --clients 64,256 --client-procs 8
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.marian import OPUS, TINY, write, write_opus_mt


def main() -> None:
    """Write the checkpoint to the given folder."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--tiny", action="store_true", help="d_model 64, 2+2 layers, vocab 1000 (checks the script)")
    p.add_argument(
        "--beam-default", action="store_true", help="OPUS-MT's generation config: num_beams 4, max_length 512"
    )
    args = p.parse_args()
    shape = TINY if args.tiny else OPUS
    print(write_opus_mt(args.out, shape) if args.beam_default else write(args.out, shape))


if __name__ == "__main__":
    main()
