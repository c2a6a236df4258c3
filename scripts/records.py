"""The results file: every benchmark run appends one record, and docs/benchmarks.md and the README's results are
generated from these records (scripts/gen_benchmarks.py), never typed by hand.

A record is one JSON line in benchmarks/results/SCRIPT.jsonl (MT_RESULTS names another folder: the test suite's
tiny runs write to a temporary one, and time the machine's GEMM rate for MT_GEMM_SECONDS instead of a second):

    {"script": "bench_decode.py", "date": "2026-12-06T16:02:11Z", "commit": "b70ce5e…", "dirty": false,
     "command": "python scripts/bench_decode.py --peers onmt", "machine": {"label": "EPYC Zen 3", …},
     "versions": {"python": "3.11.7", "torch": "2.13.0", "mt": "0.1.0"},
     "title": "decoding speed, the peers' synthetic workload",
     "figures": [{"engine": "mt", "mode": "greedy", "sentences/s": 107.8}], "source": "measured"}

`figures` is one table of one run: rows of column → value, each column named with its unit.

Shell scripts record through the command line:

    python scripts/records.py add --script quickstart.sh --command "bash scripts/quickstart.sh" \\
        --title "the quick-start" --figure "test BLEU=29.07" --figure "training seconds=883"
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# The CPU features that change which kernels run: vector width, bf16 and int8 products, Intel's tile unit.
FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8")


def results_dir() -> Path:
    return Path(os.environ.get("MT_RESULTS", RESULTS))


def cpu_facts() -> dict:
    """Model, family, model number, cores and the kernel-relevant flags, as /proc/cpuinfo (what lscpu reads) says."""
    text = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").exists() else ""
    fields = dict(re.findall(r"^([^\t:]+?)\s*:\s*(.*)$", text.split("\n\n")[0], re.M))
    flags = set(fields.get("flags", "").split())
    return {"cpu": fields.get("model name", platform.processor() or platform.machine()),
            "vendor": fields.get("vendor_id", ""), "family": int(fields.get("cpu family", 0) or 0),
            "model": int(fields.get("model", 0) or 0), "cores": os.cpu_count(),
            "flags": [flag for flag in FLAGS if flag in flags]}


def label(cpu: dict) -> str:
    """A short name for a CPU: AMD's generation from its family and model, Intel's model number, else its name."""
    if cpu["vendor"] == "AuthenticAMD":
        zen = {23: "Zen 2" if cpu["model"] >= 0x30 else "Zen", 26: "Zen 5"}.get(cpu["family"])
        if cpu["family"] == 25:
            zen = "Zen 4" if 0x10 <= cpu["model"] <= 0x1F or cpu["model"] >= 0x60 else "Zen 3"
        return f"EPYC {zen}" if zen else f"AMD family {cpu['family']} model {cpu['model']}"
    if cpu["vendor"] == "GenuineIntel":
        return f"Xeon {cpu['model']}"
    return cpu["cpu"]


def gemm_rate(threads: int = 2, n: int = 2048) -> float:
    """GFLOP/s of an fp32 n³ matrix product on `threads` threads, as the peers harness's gemm.py measures it: the
    figure that tells two machines of one label apart, and that moves with the machine's load."""
    import torch
    seconds = float(os.environ.get("MT_GEMM_SECONDS", 1.0))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b, c = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
        for _ in range(3):
            torch.matmul(a, b, out=c)
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            torch.matmul(a, b, out=c)
            done += 1
        return round(2 * n ** 3 * done / (time.perf_counter() - start) / 1e9, 1)
    finally:
        torch.set_num_threads(before)


def gpu_name() -> str | None:
    try:
        import torch
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        return None


def machine(gemm: float | None = None) -> dict:
    """The machine a figure came from; `gemm` is the GEMM rate if the caller measured it already."""
    cpu = cpu_facts()
    return {"label": label(cpu), **cpu, "gemm_gflops": gemm if gemm is not None else gemm_rate(),
            "gpu": gpu_name()}


def versions() -> dict:
    import importlib.metadata as metadata
    found = {"python": platform.python_version()}
    for package in ("torch", "mt", "ctranslate2", "transformers"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return found


def commit() -> tuple[str, bool]:
    """The commit the code under measurement is at, and whether the work tree differs from it."""
    def git(*args: str) -> str:
        run = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return run.stdout.strip() if run.returncode == 0 else ""
    # the results file itself changes as runs append to it: that is not the code under measurement
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results")
    return git("rev-parse", "HEAD") or "unknown", bool(changed)


AT_START = commit()  # a benchmark imports this module as it starts: the code it measures is the tree's then


def record(script: str, title: str, figures: list[dict] | dict, command: str | None = None,
           gemm: float | None = None) -> Path:
    """Appends one record of this run to the results file and returns its path; `figures` is a table's rows,
    or one row."""
    head, dirty = AT_START
    entry = {"script": script, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "commit": head, "dirty": dirty, "command": command or shlex.join(["python", *sys.argv]),
             "machine": machine(gemm), "versions": versions(), "title": title,
             "figures": [figures] if isinstance(figures, dict) else figures, "source": "measured"}
    path = results_dir() / f"{Path(script).stem}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:  # one short line per append: a reader never sees half of one
        file.write(json.dumps(entry, ensure_ascii=False) + "\n")
    print(f"recorded in {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def parse_figure(text: str) -> tuple[str, float | str]:
    name, _, value = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"{text!r}: a figure is NAME=VALUE")
    try:
        return name.strip(), float(value)
    except ValueError:
        return name.strip(), value.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="action", required=True)
    add = commands.add_parser("add", help="append one record (for shell scripts)")
    add.add_argument("--script", required=True)
    add.add_argument("--command", required=True, help="the command that produced the figures")
    add.add_argument("--title", required=True, help="what the figures measure")
    add.add_argument("--figure", type=parse_figure, action="append", required=True, help="NAME=VALUE")
    commands.add_parser("machine", help="print this machine's record")
    args = parser.parse_args()
    if args.action == "add":
        record(args.script, args.title, dict(args.figure), args.command)
    else:
        print(json.dumps(machine(), indent=2))


if __name__ == "__main__":
    main()
