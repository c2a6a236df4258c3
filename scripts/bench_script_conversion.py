"""Chinese script conversion in the exports: on Tatoeba test sentences in both scripts, how often each export's own
model file gives the source pieces mt gives, how often the Hugging Face export's greedy translation equals
`mt translate`'s (and how often it did with the model file as trained, without the conversion compiled in), their
BLEU, and tokenising speed: mt's OpenCC then SentencePiece, against the model file that converts by itself.

    python scripts/bench_script_conversion.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --lines 300

Each test sentence is taken as it is and converted to the other script (OpenCC), so that both scripts are there.
The figures go, as one record, into benchmarks/results/bench_script_conversion.jsonl (scripts/records.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu
import sentencepiece as spm
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mt.data.tokenizer import script_converter  # noqa: E402
from mt.decode.translator import load_translator  # noqa: E402
from mt.exchange.ctranslate2 import export_ctranslate2  # noqa: E402
from mt.exchange.huggingface import export_huggingface  # noqa: E402
from records import record  # noqa: E402  (scripts/records.py: the results file)

TATOEBA = Path(__file__).resolve().parents[2] / "shared" / "data" / "zh-en" / "tatoeba"


def both_scripts(lines: list[str]) -> list[str]:
    """Each line as it is, then converted into the script it is mostly not in."""
    simplified, traditional = script_converter("simplified")(lines), script_converter("traditional")(lines)
    return lines + [s if s != line else t for line, s, t in zip(lines, simplified, traditional)]


def hf_greedy(directory: Path, lines: list[str], max_length: int, source_model: bytes | None = None) -> list[str]:
    """transformers' own greedy translation with the Hugging Face export in `directory`; with `source_model`, its
    source.spm replaced by that model file first."""
    import transformers

    if source_model is not None:
        (directory / "source.spm").write_bytes(source_model)
    tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    model = transformers.MarianMTModel.from_pretrained(directory).eval()
    outputs = []
    with torch.inference_mode():
        for start in range(0, len(lines), 32):
            batch = tokenizer(lines[start:start + 32], return_tensors="pt", padding=True)
            generated = model.generate(**batch, num_beams=1, do_sample=False, max_length=max_length)
            outputs += tokenizer.batch_decode(generated, skip_special_tokens=True)
    return outputs


def tokenising_speed(tokenizer, lines: list[str], repeats: int = 3) -> float:
    """Source lines per second through a tokenizer's encode_src: the best of `repeats`."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        tokenizer.encode_src(lines)
        best = min(best, time.perf_counter() - start)
    return len(lines) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--lines", type=int, default=300, help="Tatoeba test sentences (each in both scripts)")
    parser.add_argument("--speed-lines", type=int, default=26_220, help="Tatoeba train sentences to tokenise")
    args = parser.parse_args()
    zh = (TATOEBA / "test.zh").read_text(encoding="utf-8").splitlines()[:args.lines]
    en = (TATOEBA / "test.en").read_text(encoding="utf-8").splitlines()[:args.lines]
    sources, references = both_scripts(zh), en + en
    translator = load_translator(args.checkpoint, device="cpu")
    mine = translator.tokenizer
    start = time.perf_counter()
    converting = mine.self_converting()
    compiling = time.perf_counter() - start
    traditional = sum(s != line for line, s in zip(sources, script_converter("simplified")(sources)))
    print(f"inputs: {len(sources)} ({traditional} with Traditional characters); "
          f"model scripts {mine.scripts}; CPU threads {torch.get_num_threads()}")

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        hf, ct2 = Path(scratch) / "hf", Path(scratch) / "ct2"
        export_huggingface(args.checkpoint, hf)
        export_ctranslate2(args.checkpoint, ct2)
        ids = translator.encode(sources)
        for name, model_file in (("huggingface source.spm", hf / "source.spm"),
                                 ("ctranslate2 " + ("spm.model" if mine.joint else "spm.src.model"),
                                  ct2 / ("spm.model" if mine.joint else "spm.src.model"))):
            theirs = spm.SentencePieceProcessor(model_file=str(model_file)).encode(sources)
            same = sum(a[:-1] == b for a, b in zip(ids, theirs))  # mt's end with EOS
            rows.append({"measure": f"source pieces equal to mt's, {name}", "count": same, "of": len(sources)})
            print(f"{rows[-1]['measure']}: {same}/{len(sources)}")

        ours = translator.translate_lines(sources, dataclasses.replace(translator.decode, beam_size=1))
        length = translator.config.model.max_positions
        for name, model_file in (("converting", None), ("as trained", mine.src_proto)):  # the export's own first
            theirs = hf_greedy(hf, sources, length, model_file)
            same = sum(a == b for a, b in zip(ours, theirs))
            rows.append({"measure": f"transformers greedy equal to mt translate, model file {name}", "count": same,
                         "of": len(sources), "%": round(100 * same / len(sources), 1),
                         "BLEU": round(sacrebleu.corpus_bleu(theirs, [references]).score, 1)})
            print(f"{rows[-1]['measure']}: {same}/{len(sources)} ({rows[-1]['%']:.1f}%), BLEU {rows[-1]['BLEU']:.1f}")
        shutil.rmtree(hf)
    rows.append({"measure": "mt translate greedy", "BLEU": round(sacrebleu.corpus_bleu(ours, [references]).score, 1)})
    print(f"mt translate greedy BLEU {rows[-1]['BLEU']:.1f}")

    train = (TATOEBA / "train.zh").read_text(encoding="utf-8").splitlines()[:args.speed_lines]
    rows.append({"measure": "compiling the conversion into the model file", "seconds": round(compiling, 2)})
    print(f"{rows[-1]['measure']}: {rows[-1]['seconds']:.2f} s")
    before, after = (round(tokenising_speed(tokenizer, train)) for tokenizer in (mine, converting))
    rows += [{"measure": f"tokenising {len(train)} lines, OpenCC + SentencePiece", "lines/s": before},
             {"measure": f"tokenising {len(train)} lines, converting model file", "lines/s": after,
              "×": round(after / before, 2)}]
    print(f"tokenising {len(train)} lines: OpenCC + SentencePiece {before:,} lines/s, converting model file "
          f"{after:,} lines/s ({rows[-1]['×']:.2f}x)")
    record("bench_script_conversion.py", f"Chinese script conversion in the exports, {len(sources)} Tatoeba test "
           "inputs in both scripts", rows)


if __name__ == "__main__":
    main()
