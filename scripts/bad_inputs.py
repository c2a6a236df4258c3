"""Try each kind of bad input on the real CLI and print a markdown table: the case, what the user sees, and the
exit status. It trains a tiny model on 300 Tatoeba pairs first (a few seconds), for the cases that need one.

    python scripts/bad_inputs.py > /tmp/table.md
    python scripts/bad_inputs.py --only config checkpoint   # the cases whose name holds either word
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba"

TINY = """model: {{d_model: 32, num_heads: 2, d_ff: 64, num_encoder_layers: 1, num_decoder_layers: 1}}
tokenizer: {{vocab_size: 600, byte_fallback: false}}
data: {{train: {{path: {data}/train}}, dev: {{path: {data}/dev}}, test: {{path: {data}/dev}}, max_len: 32}}
train: {{max_steps: 10, max_tokens: 300, warmup_steps: 10, eval_every: 10, log_every: 5}}
"""


def mt(*args: str, cwd: Path, stdin: bytes | None = None) -> tuple[str, int]:
    result = subprocess.run([sys.executable, "-m", "mt", *args], cwd=cwd, input=stdin, capture_output=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    stderr = result.stderr.decode("utf-8", "replace")
    lines = [line for line in stderr.splitlines() if line.startswith(("mt:", "warning:"))]
    if "Traceback" in stderr:
        lines.append("(a traceback!)")
    return " / ".join(lines) or "(nothing on stderr)", result.returncode


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="WORD", help="the cases whose name holds one of these words")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    data = work / "data"
    data.mkdir()
    for split, n in (("train", 300), ("dev", 20)):
        for lang in ("zh", "en"):
            lines = (TATOEBA / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            write(data / f"{split}.{lang}", "\n".join(lines) + "\n")
    write(work / "tiny.yaml", TINY.format(data=data))
    message, status = mt("train", "-c", "tiny.yaml", cwd=work)
    assert status == 0, message
    run = work / "runs" / "tiny"
    checkpoint = run / "checkpoints" / "last.pt"

    write(work / "short.zh", "一\n二\n三\n")
    write(work / "short.en", "one\ntwo\n")
    write(work / "bad.zh", "一\n二\n".encode() + b"\xff\xfe\n")
    write(work / "bad.en", "one\ntwo\nthree\n")
    write(work / "empty.zh", "\n\n")
    write(work / "empty.en", "\n\n")
    write(work / "notyaml.yaml", "model: {d_model: [512\n")
    write(work / "cut.pt", checkpoint.read_bytes()[:50_000])
    write(work / "code.pt", b"")  # replaced below by a pickle that would run code
    evil = ("import os, torch\nclass P:\n    def __reduce__(self):\n        return os.system, ('echo pwned',)\n"
            f"torch.save({{'model': {{}}, 'config': {{}}, 'x': P()}}, {str(work / 'code.pt')!r})\n")
    subprocess.run([sys.executable, "-c", evil], check=True)
    big = ["-c", "tiny.yaml", "--set", "model.d_model=64", "--set", "model.num_heads=4"]

    cases = [
        ("config file missing", ["train", "-c", "nothere.yaml"]),
        ("config file not YAML", ["train", "-c", "notyaml.yaml"]),
        ("unknown config key", ["train", "-c", "tiny.yaml", "--set", "model.d_modle=512"]),
        ("wrong type", ["train", "-c", "tiny.yaml", "--set", "train.max_steps=many"]),
        ("d_model not divisible by heads", ["train", "-c", "tiny.yaml", "--set", "model.num_heads=5"]),
        ("negative dropout", ["train", "-c", "tiny.yaml", "--set", "model.dropout=-0.1"]),
        ("training data file missing", ["train", "-c", "tiny.yaml", "--run-dir", "r1",
                                        "--set", f"data.train.path={work / 'nothere'}"]),
        ("source and target line counts differ", ["train", "-c", "tiny.yaml", "--run-dir", "r2",
                                                  "--set", f"data.train.path={work / 'short'}"]),
        ("invalid UTF-8 in a corpus", ["train", "-c", "tiny.yaml", "--run-dir", "r3",
                                       "--set", f"data.train.path={work / 'bad'}"]),
        ("corpus empty after filtering", ["train", "-c", "tiny.yaml", "--run-dir", "r4",
                                          "--set", f"data.train.path={work / 'empty'}"]),
        ("training into an existing run", ["train", "-c", "tiny.yaml"]),
        ("--resume with another model size", ["train", *big, "--resume"]),
        ("--device cuda without CUDA", ["translate", "--device", "cuda", "--checkpoint", str(checkpoint), "hi"]),
        ("--beam 0", ["translate", "--beam", "0", "hi"]),
        ("checkpoint missing", ["translate", "--checkpoint", "nothere.pt", "hi"]),
        ("checkpoint truncated", ["translate", "--checkpoint", "cut.pt", "hi"]),
        ("checkpoint carrying code", ["translate", "--checkpoint", "code.pt", "hi"]),
        ("input file missing", ["translate", "--input", "nothere.zh"]),
        ("output directory missing", ["translate", "--output", "no/such/dir/out.en", "hi"]),
        ("invalid UTF-8 on stdin", ["translate"], b"ok\n\xff\n"),
        ("a 10,000-character line on stdin", ["translate"], ("我爱你。" * 2_500 + "\n").encode()),
        ("--init-from a checkpoint of another model size", ["train", *big, "--run-dir", "r6", "--init-from",
                                                            str(checkpoint)]),
        ("an ensemble of models with different vocabularies",
         ["translate", "--checkpoint", str(checkpoint), "--checkpoint", "runs/other/checkpoints/last.pt", "hi"], None,
         lambda: mt("train", "-c", "tiny.yaml", "--run-dir", "runs/other", "--set", "tokenizer.vocab_size=500",
                    cwd=work)),
        ("a second training into a run that is training", ["train", "-c", "tiny.yaml", "--resume"], None,
         lambda: hold(run)),
        ("a run whose training was killed (its lock left behind)",
         ["train", "-c", "tiny.yaml", "--resume", "--set", "train.max_steps=12"], None, lambda: hold(run).kill()),
        ("token cache cut short", ["train", "-c", "tiny.yaml", "--resume", "--set", "train.max_steps=14"], None,
         lambda: cut_in_three(next((run / "cache").glob("train-*.arrow")))),
        ("tokenizer file cut short", ["prepare", "-c", "tiny.yaml", "--run-dir", "r5"], None,
         lambda: write_cut_tokenizer(run / "spm.model", work / "r5")),
        ("--run-dir of other files", ["train", "-c", "tiny.yaml", "--run-dir", "mine"]),
        ("export over a file", ["export", "--ctranslate2", "mine/notes.txt", "--checkpoint", str(checkpoint)]),
        ("plot over a text file", ["plot", "runs/tiny", "-o", "mine/notes.txt"]),
        ("translations into a directory", ["translate", "-o", "mine", "hi"]),
    ]
    cases = [case for case in cases if not args.only or any(word in case[0] for word in args.only)]
    (work / "mine").mkdir()
    write(work / "mine" / "notes.txt", "my own notes\n")
    print("| bad input | what `mt` prints | exit status |\n|---|---|---:|")
    for name, args, stdin, *setup in (case + (None,) * (3 - len(case)) for case in cases):
        holder = setup[0]() if setup else None
        message, status = mt(*args, cwd=work, stdin=stdin)
        if isinstance(holder, subprocess.Popen):
            holder.kill()
            holder.wait()
        print(f"| {name} | `{message.replace('|', '/').replace(str(work) + '/', '')}` | {status} |")


HOLD = """import sys, time
from pathlib import Path
from mt.core.run_lock import lock_run_dir
with lock_run_dir(Path(sys.argv[1]), "mt train"):
    print("locked", flush=True)
    time.sleep(120)
"""


def hold(run: Path) -> subprocess.Popen:
    """Another process holding the run's lock, as a training does."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert holder.stdout.readline() == "locked\n"
    return holder


def cut_in_three(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 3)


def write_cut_tokenizer(model: Path, run: Path) -> None:
    """A run directory holding its tokenizer cut short where SentencePiece still loads it (with fewer pieces)."""
    import sentencepiece as spm

    proto = model.read_bytes()
    for cut in range(100, len(proto)):
        try:
            spm.SentencePieceProcessor(model_proto=proto[:cut])
        except RuntimeError:
            continue
        run.mkdir()
        write(run / "spm.model", proto[:cut])
        return


if __name__ == "__main__":
    main()
