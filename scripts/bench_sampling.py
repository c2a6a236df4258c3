"""What subword regularisation costs per epoch: a config's once-only data preparation (reading the corpora,
training the tokenizer, the ids of every pair through the cached `datasets.map`, the length filter), then one
epoch's sampled segmentation (BPE-dropout) of the same training pairs, timed back to back in one process.

    python scripts/bench_sampling.py -c configs/dialogue-cpu.yaml --set data.dev.path=../shared/data/zh-en/tatoeba/dev

The run directory is a new temporary one (deleted at the end), so the preparation starts from nothing.
"""

from __future__ import annotations

import argparse
import logging
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mt.config import load_config  # noqa: E402
from mt.core.console import setup_logging  # noqa: E402
from mt.train.prepare import prepare_data  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", action="append", type=Path, required=True)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--alpha", type=float, default=0.1, help="tokenizer.sampling_alpha (default 0.1)")
    parser.add_argument("--epochs", type=int, default=2, help="sampled epochs to time (default 2)")
    args = parser.parse_args()
    setup_logging("quiet")
    logging.getLogger("mt").setLevel(logging.WARNING)
    run_dir = Path(tempfile.mkdtemp(prefix="bench-sampling-"))
    try:
        config = load_config(args.config, args.set + [f"tokenizer.sampling_alpha={args.alpha}"], str(run_dir))
        start = time.perf_counter()
        data = prepare_data(config, run_dir, None)
        once = time.perf_counter() - start
        pairs = len(data.train.rows)
        print(f"once-only preparation: {once:.1f} s for {pairs:,} training pairs per epoch "
              f"(reading, tokenizer, ids, filter)")
        for epoch in range(args.epochs):
            start = time.perf_counter()
            sampled = data.train_batches(epoch)
            took = time.perf_counter() - start
            print(f"epoch {epoch}, sampled segmentation (alpha {args.alpha}): {took:.1f} s, {took / once:.2f}× the "
                  f"once-only preparation; {len(sampled.rows):,} pairs kept, "
                  f"{sampled.tgt_len.mean():.1f} target tokens per pair (best segmentation "
                  f"{data.train.tgt_len.mean():.1f})")
        print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
