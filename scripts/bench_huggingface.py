"""The Hugging Face export against mt itself, on all Tatoeba test sentences: greedy outputs that differ (the goal is
0), beam search's best outputs that differ (each side with its own length penalty, and with none), and the decoding
speed of both, in the same run.

    python scripts/bench_huggingface.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt
    python scripts/bench_huggingface.py --checkpoint … --transformers-path DIR   # another transformers, e.g. 4.57

transformers runs in a child process that imports only it and torch, so that another version of it (and of the
huggingface_hub it needs) can be put first on its path: with transformers 4.x the child translates with
`pipeline("translation", model=DIR)`; transformers 5 removed that pipeline, so with 5.x it calls what the pipeline
called, `MarianMTModel.generate` and `MarianTokenizer.batch_decode`.

mt's beam search scores log p / ((5 + length) / 6) ** alpha (GNMT); transformers' log p / length ** alpha.
With alpha 0 both rank by log p alone.

The table goes, as one record, into benchmarks/results/bench_huggingface.jsonl (scripts/records.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from records import record  # scripts/records.py: the results file

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba" / "test.zh"
SEARCHES = [("greedy", 1, 0.6), ("beam 4, α 0.6 (each side its own penalty)", 4, 0.6), ("beam 4, α 0", 4, 0.0)]
LIFTED = "greedy, mt's output limit lifted to transformers' max_length"  # one limit for both: the position table


def transformers_side(directory: str, batch_size: int, sentences: int | None) -> None:
    """In the child: every search's outputs and seconds, as JSON on stdout."""
    import torch
    import transformers

    torch.set_num_threads(2)
    lines = TEST.read_text(encoding="utf-8").splitlines()[:sentences]
    if int(transformers.__version__.split(".")[0]) < 5:
        translate = transformers.pipeline("translation", model=directory, device="cpu")
        via = "pipeline(\"translation\")"

        def run(beam, alpha):
            return [r["translation_text"] for r in translate(lines, batch_size=batch_size, num_beams=beam,
                                                                length_penalty=alpha)]
    else:
        tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
        model = transformers.MarianMTModel.from_pretrained(directory).eval()
        via = "MarianMTModel.generate"

        def run(beam, alpha):
            texts = []
            for start in range(0, len(lines), batch_size):
                batch = tokenizer(lines[start:start + batch_size], return_tensors="pt", padding=True)
                with torch.inference_mode():
                    generated = model.generate(**batch, num_beams=beam, length_penalty=alpha)
                texts += tokenizer.batch_decode(generated, skip_special_tokens=True)
            return texts

    results = []
    for _, beam, alpha in SEARCHES:
        start = time.perf_counter()
        texts = run(beam, alpha)
        results.append({"texts": texts, "seconds": time.perf_counter() - start})
    print(json.dumps({"version": transformers.__version__, "via": via, "results": results}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per transformers batch")
    parser.add_argument("--transformers-path", help="put this directory first on the child's PYTHONPATH")
    parser.add_argument("--sentences", type=int, metavar="N", help="the first N test sentences (default: all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return transformers_side(args.child, args.batch_size, args.sentences)
    import torch

    from mt.exchange.huggingface import export_huggingface
    from mt.decode.translator import load_translator

    torch.set_num_threads(2)
    lines = TEST.read_text(encoding="utf-8").splitlines()[:args.sentences]
    directory = Path(tempfile.mkdtemp()) / "hf"
    export_huggingface(args.checkpoint, directory)
    translator = load_translator(args.checkpoint, "cpu")
    ours = []
    for _, beam, alpha in SEARCHES:
        start = time.perf_counter()
        ours.append((translator.translate_lines(lines, translator.decode.replace(beam_size=beam, alpha=alpha)),
                     time.perf_counter() - start))
    lifted = translator.decode.replace(beam_size=1, max_len_a=0.0, max_len_b=translator.config.model.max_positions)
    env = dict(os.environ)
    if args.transformers_path:
        env["PYTHONPATH"] = os.pathsep.join([args.transformers_path] + [p for p in [env.get("PYTHONPATH")] if p])
    limit = ["--sentences", str(args.sentences)] if args.sentences else []
    child = subprocess.run([sys.executable, __file__, "--child", str(directory), "--batch-size", str(args.batch_size),
                            *limit], env=env, capture_output=True, text=True)
    if child.returncode != 0:
        raise SystemExit(child.stderr[-3000:])
    theirs = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"{len(lines):,} Tatoeba test sentences; transformers {theirs['version']} via {theirs['via']}, batches of "
          f"{args.batch_size}; mt in batches of {translator.decode.max_tokens:,} source tokens; otherwise the "
          f"checkpoint's decode settings on both sides (no repeated {translator.decode.no_repeat_ngram_size}-gram)\n")
    print("| search | mt sentences/s | transformers sentences/s | outputs that differ |\n|---|---:|---:|---:|")
    rows = []
    for (name, _, _), (mine, seconds), result in zip(SEARCHES, ours, theirs["results"]):
        differ = [(line, a, b) for line, a, b in zip(lines, mine, result["texts"]) if a != b]
        rows.append({"search": name, "mt sentences/s": round(len(lines) / seconds, 1),
                     "transformers sentences/s": round(len(lines) / result["seconds"], 1),
                     "outputs that differ": len(differ)})
        print(f"| {name} | {rows[-1]['mt sentences/s']} | {rows[-1]['transformers sentences/s']} | "
              f"{len(differ)} of {len(lines):,} |")
        for line, a, b in differ[:3]:
            print(f"|   e.g. {line} | mt: {a} | transformers: {b} | |")
    differ = sum(a != b for a, b in zip(translator.translate_lines(lines, lifted), theirs["results"][0]["texts"]))
    rows.append({"search": LIFTED, "outputs that differ": differ})
    print(f"| {LIFTED} | | | {differ} of {len(lines):,} |")
    record("bench_huggingface.py", f"the Hugging Face export against mt, {len(lines):,} Tatoeba test sentences, "
           f"transformers {theirs['version']}", rows)


if __name__ == "__main__":
    main()
