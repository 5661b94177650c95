"""A random OPUS-MT-shaped Marian checkpoint on disk (tokenizer files included), for serving benchmarks on a GPU.

python -m bench.opus_shape /tmp/opus-mt-en-de   # d_model 512, 6+6, vocab 58101; the pair comes from the name
python -m bench.serving --device cuda --model /tmp/opus-mt-en-de --clients 64,256 --client-procs 8
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.marian import OPUS, TINY, write


def main() -> None:
    """Write the checkpoint to the given folder."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--tiny", action="store_true", help="d_model 64, 2+2 layers, vocab 1000 (checks the script)")
    args = p.parse_args()
    print(write(args.out, TINY if args.tiny else OPUS))


if __name__ == "__main__":
    main()
