"""What subword regularisation costs per epoch: a config's once-only data preparation (reading the corpora,
training the tokenizer, the ids of every pair through the cached `datasets.map`, the length filter), then one
epoch's sampled segmentation (BPE-dropout) of the same training pairs, timed back to back in one process.

    python scripts/bench_sampling.py -c configs/dialogue-cpu.yaml --set data.dev.path=../shared/data/zh-en/tatoeba/dev

The run directory is a new temporary one (deleted at the end), so the preparation starts from nothing. The figures
go, as one record, into benchmarks/results/bench_sampling.jsonl (scripts/records.py).
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
from records import record  # noqa: E402  (scripts/records.py: the results file)


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
        rows = [{"step": "once-only preparation", "seconds": round(once, 1), "pairs": len(data.train.rows),
                 "target tokens per pair": round(float(data.train.tgt_len.mean()), 1)}]  # the best segmentation
        print(f"once-only preparation: {rows[0]['seconds']:.1f} s for {rows[0]['pairs']:,} training pairs per epoch "
              f"(reading, tokenizer, ids, filter)")
        for epoch in range(args.epochs):
            start = time.perf_counter()
            sampled = data.train_batches(epoch)
            took = time.perf_counter() - start
            rows.append({"step": f"epoch {epoch}, sampled segmentation", "seconds": round(took, 1),
                         "× preparation": round(took / once, 2), "pairs": len(sampled.rows),
                         "target tokens per pair": round(float(sampled.tgt_len.mean()), 1)})
            print(f"epoch {epoch}, sampled segmentation (alpha {args.alpha}): {rows[-1]['seconds']:.1f} s, "
                  f"{rows[-1]['× preparation']:.2f}× the once-only preparation; {rows[-1]['pairs']:,} pairs kept, "
                  f"{rows[-1]['target tokens per pair']:.1f} target tokens per pair (best segmentation "
                  f"{rows[0]['target tokens per pair']:.1f})")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append({"step": "the whole run", "peak memory MB": round(peak)})
        print(f"peak memory {rows[-1]['peak memory MB']:,} MB")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    record("bench_sampling.py", f"subword regularisation's cost per epoch, {', '.join(c.name for c in args.config)} "
           f"(alpha {args.alpha})", rows)


if __name__ == "__main__":
    main()
