"""Importing a model of opus-mt-zh-en's shape (d_model 512, 8 heads, d_ff 2048, 6+6 layers, vocabulary 65,001;
built at random weights, as tests/opus_mt.py lays OPUS-MT out: the hub is out of reach): `mt import`'s time and
peak memory; loading the import and translating one sentence in a new process; then greedy and beam-4 speed on
Tatoeba test sentences with mt's engine, its CTranslate2 export and transformers on the Marian model, and how many
greedy outputs of mt equal transformers'.

    python scripts/bench_import.py [--sentences 200] [--max-tokens 32]

Random weights never end a sentence early: every output runs to the limit of --max-tokens, the same on each side,
so the figures are of that many output tokens per sentence. They go, as one record, into
benchmarks/results/bench_import.jsonl (scripts/records.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import transformers  # noqa: E402

from mt.decode.translator import load_translator  # noqa: E402
from mt.exchange.ctranslate2 import export_ctranslate2  # noqa: E402
from opus_mt import OPUS_MT_ZH_EN, opus_mt_like  # noqa: E402
from records import record  # noqa: E402  (scripts/records.py: the results file)

TATOEBA = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba"


def child(*args: str) -> dict:
    """Run `python -m mt ARGS`: its wall time and peak resident memory."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen([sys.executable, "-m", "mt", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own peak, not the largest child's so far
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            errors.seek(0)
            sys.exit(f"mt {' '.join(args)} failed:\n{errors.read().decode(errors='replace')[-2000:]}")
    return {"seconds": round(seconds, 1), "peak memory MB": round(usage.ru_maxrss / 1024)}


def timed(translate, lines: list[str]) -> tuple[list[str], float]:
    """The outputs, and sentences/s."""
    start = time.perf_counter()
    outputs = translate(lines)
    return outputs, round(len(lines) / (time.perf_counter() - start), 1)


def marian_translate(directory: Path, max_tokens: int):
    """transformers' translation with the Marian model in `directory`, in batches of 32: loaded now, so that its
    speed is of translating alone."""
    tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    model = transformers.MarianMTModel.from_pretrained(directory).eval()

    def translate(lines: list[str], beam: int) -> list[str]:
        outputs = []
        with torch.inference_mode():
            for start in range(0, len(lines), 32):
                batch = tokenizer(lines[start:start + 32], return_tensors="pt", padding=True)
                generated = model.generate(**batch, num_beams=beam, max_new_tokens=max_tokens,
                                           **({"length_penalty": 0.0} if beam > 1 else {}))
                outputs += tokenizer.batch_decode(generated, skip_special_tokens=True)
        return outputs
    return translate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=200, help="Tatoeba test sentences to translate")
    parser.add_argument("--max-tokens", type=int, default=32, help="output tokens per sentence")
    parser.add_argument("--shape", choices=["opus-mt-zh-en", "small"], default="opus-mt-zh-en",
                        help="small: a tiny model of the same layout (the test suite's)")
    args = parser.parse_args()
    transformers.logging.disable_progress_bar()
    shape = OPUS_MT_ZH_EN if args.shape == "opus-mt-zh-en" else dict(
        d_model=32, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        encoder_layers=1, decoder_layers=1)  # and the vocabulary of its SentencePiece models alone
    lines = (TATOEBA / "test.zh").read_text(encoding="utf-8").splitlines()[:args.sentences]
    with tempfile.TemporaryDirectory() as scratch:
        marian_dir, checkpoint, ct2 = Path(scratch) / "marian", Path(scratch) / "imported.pt", Path(scratch) / "ct2"
        corpus = Path(scratch) / "corpus"  # the SentencePiece models' text: the test suite's 300 training pairs
        corpus.mkdir()
        for side in ("zh", "en"):
            train = (TATOEBA / f"train.{side}").read_text(encoding="utf-8").splitlines()[:300]
            (corpus / f"train.{side}").write_text("\n".join(train) + "\n", encoding="utf-8")
        opus_mt_like(marian_dir, corpus, shape)
        rows = [{"step": "mt import", **child("import", "--huggingface", str(marian_dir), "-o", str(checkpoint))}]
        translator = load_translator(checkpoint, "cpu")
        parameters = sum(p.numel() for p in translator.engine.models[0].parameters())
        vocabulary = translator.tokenizer.tgt_vocab_size - 1  # mt's BOS beside Marian's pad
        print(f"model: {parameters:,} parameters, vocabulary {vocabulary:,}; "
              f"CPU threads {torch.get_num_threads()}")
        print(f"mt import: {rows[0]['seconds']} s, peak memory {rows[0]['peak memory MB']:,} MB")
        rows.append({"step": "load and translate one sentence (new process)",
                     **child("translate", "--checkpoint", str(checkpoint), "--beam", "1", "我爱你")})
        print(f"{rows[1]['step']}: {rows[1]['seconds']} s, peak memory {rows[1]['peak memory MB']:,} MB")
        export_ctranslate2(checkpoint, ct2)
        ct2_translator = load_translator(ct2, "cpu", engine="ctranslate2")
        marian = marian_translate(marian_dir, args.max_tokens)
        print(f"{len(lines)} sentences, {args.max_tokens} output tokens each\n")
        print("| search | mt sentences/s | CTranslate2 sentences/s | transformers sentences/s | "
              "mt greedy = transformers' |")
        print("|---|---:|---:|---:|---:|")
        for beam in (1, 4):
            decode = translator.decode.replace(beam_size=beam, alpha=0.0, max_len_a=0.0, max_len_b=args.max_tokens,
                                               no_repeat_ngram_size=0, min_len=0)
            ours, mt_speed = timed(lambda batch: translator.translate_lines(batch, decode), lines)
            _, ct2_speed = timed(lambda batch: ct2_translator.translate_lines(batch, decode), lines)
            theirs, hf_speed = timed(lambda batch: marian(batch, beam), lines)
            equal = sum(a == b for a, b in zip(ours, theirs)) if beam == 1 else None
            rows.append({"step": "translate", "search": "greedy" if beam == 1 else f"beam {beam}",
                         "mt sentences/s": mt_speed, "CTranslate2 sentences/s": ct2_speed,
                         "transformers sentences/s": hf_speed, "mt greedy = transformers'": equal})
            print(f"| {rows[-1]['search']} | {mt_speed} | {ct2_speed} | {hf_speed} | "
                  f"{'' if equal is None else f'{equal} of {len(lines)}'} |")
    record("bench_import.py", f"importing a model of {args.shape}'s shape ({parameters:,} parameters), "
           f"{len(lines)} Tatoeba test sentences, {args.max_tokens} output tokens each", rows)


if __name__ == "__main__":
    main()
