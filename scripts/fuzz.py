"""Fuzz `mt`'s doors (tests/doors.py) for N examples or T minutes each, and save every distinct failure as a
regression case under tests/fuzz_cases/DOOR/, which the test suite replays. Prints, per door, the examples run, the
failures and the time per 1,000 examples.

Two engines draw the examples from each door's Hypothesis strategy. `hypothesis` (the default) draws them at random.
`atheris` runs libFuzzer over mt's own code, instrumented for coverage, through Hypothesis's fuzz_one_input: the
bytes behind an example that reached a new branch of mt are kept and mutated further, so inputs dig deeper into
the code that reads them. Each door then runs in a process of its own (libFuzzer ends the process it runs in),
and the table's next lines give libFuzzer's coverage of mt: edges, features and the inputs it kept. Each door's
figures go, as a row of one record, into benchmarks/results/fuzz.jsonl (scripts/records.py).

    python scripts/fuzz.py all --examples 10000
    python scripts/fuzz.py checkpoint http --minutes 5
    python scripts/fuzz.py document config --engine atheris --minutes 10
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import os
import pkgutil
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from records import record  # noqa: E402  (scripts/records.py: the results file)

CASES = ROOT / "tests" / "fuzz_cases"
BATCH = 200  # examples per Hypothesis run; runs repeat, each with fresh random draws, until the budget is spent
# libFuzzer's options: a process over 8 GB is a failure (a third of the machine), and inputs up to 4 kB from the
# start (a door's example takes a few hundred bytes of Hypothesis's choices; libFuzzer would otherwise start from 4
# and grow them slowly)
LIBFUZZER = ["-rss_limit_mb=8192", "-max_len=4096", "-len_control=0"]


class Tally:
    """A door's examples so far, and its failures by kind: the smallest input of each kind, with its message."""

    def __init__(self, door, world):
        self.door, self.world = door, world
        self.examples = 0
        self.failures: dict[str, tuple[bytes, str]] = {}

    def check(self, example) -> None:
        from doors import Failure, encode

        self.examples += 1
        try:
            self.door.check(self.world, example)
        except Failure as e:
            saved, message = encode(example), str(e)
            kind = kind_of(message)
            if kind not in self.failures or len(saved) < len(self.failures[kind][0]):
                self.failures[kind] = saved, message


def fuzz_hypothesis(name: str, examples: int, seconds: float, world) -> dict:
    """Random draws from the door's strategy until `examples` or `seconds` are spent."""
    from hypothesis import HealthCheck, given, settings
    from doors import DOORS

    tally, start = Tally(DOORS[name], world), time.perf_counter()
    while tally.examples < examples and time.perf_counter() - start < seconds:
        settings(max_examples=min(BATCH, examples - tally.examples), deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))(given(DOORS[name].strategy(world))(tally.check))()
    return {"examples": tally.examples, "seconds": time.perf_counter() - start, "failures": tally.failures}


def fuzz_atheris(name: str, examples: int, seconds: float) -> dict:
    """The door under libFuzzer in a child process (atheris_child), which reports through a status file. A child
    that dies (a crash in a library's native code, a process over libFuzzer's memory limit) or outlives its budget
    fails with the example it was checking, or with none if it was between examples."""
    with tempfile.TemporaryDirectory() as work:
        status, log = Path(work) / "status.json", Path(work) / "libfuzzer.log"
        command = [sys.executable, __file__, name, "--engine", "atheris", "--examples", str(examples),
                   "--minutes", str(seconds / 60), "--child", str(status)]
        # the time budget, and room for the world's making and one example's bound (tests/doors.py)
        limit = None if seconds == float("inf") else seconds + 300
        with log.open("wb") as out:
            try:
                returncode = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=work,
                                            timeout=limit).returncode
            except subprocess.TimeoutExpired:
                returncode = None
        output = log.read_text(encoding="utf-8", errors="replace")
        result = json.loads(status.read_text(encoding="utf-8")) if status.exists() else {}
    failures = {kind: (saved.encode(), message) for kind, (saved, message) in result.get("failures", {}).items()}
    if returncode != 0:
        ended = "killed: past its budget" if returncode is None else f"exit status {returncode}"
        current = result.get("current")
        failures["the process died"] = current and current.encode(), f"{ended}\n{output[-2000:]}"
    coverage = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", output)
    return {"examples": result.get("examples", 0), "seconds": result.get("seconds", 0.0), "failures": failures,
            "coverage": coverage[-1] if coverage else None}


def atheris_child(name: str, examples: int, seconds: float, status: Path) -> None:
    """Run in the child, mt instrumented (instrument_mt): build the world, and let libFuzzer drive the door's
    strategy until the budget is spent. The status file is rewritten before each example, so that the parent
    knows the example a dying process was checking."""
    import atheris
    from hypothesis import HealthCheck, given, settings
    from doors import DOORS, build_world, encode

    world = build_world(status.parent / "world")
    tally = Tally(DOORS[name], world)
    start = time.perf_counter()

    def report(current) -> None:
        failures = {kind: (saved.decode(), message) for kind, (saved, message) in tally.failures.items()}
        written = status.with_suffix(".part")  # replaced whole: a process dying mid-write leaves the last one
        written.write_text(json.dumps({"examples": tally.examples, "seconds": time.perf_counter() - start,
                                       "current": current, "failures": failures}), encoding="utf-8")
        os.replace(written, status)

    def check(example) -> None:
        report(encode(example).decode())
        tally.check(example)
        report(None)

    test = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))(
        given(DOORS[name].strategy(world))(check))

    def target(data: bytes) -> None:  # every input, including those too short to make an example
        if tally.examples >= examples or time.perf_counter() - start >= seconds:
            os._exit(0)  # libFuzzer only stops by ending the process
        test.hypothesis.fuzz_one_input(data)

    report(None)
    # An example's time is bounded by tests/doors.py, with a timer on SIGALRM. Atheris would set a timer of its own
    # on the same signal, and does not where a Python handler is already in place.
    signal.signal(signal.SIGALRM, lambda *_: None)
    atheris.Setup([sys.argv[0], *LIBFUZZER], target)
    atheris.Fuzz()


def instrument_mt() -> None:
    """Import every module of mt with Atheris's coverage instrumentation, before anything imports one plainly."""
    import atheris

    with atheris.instrument_imports(include=["mt"]):
        import mt
        for module in pkgutil.walk_packages(mt.__path__, "mt."):
            if module.name != "mt.__main__":  # it would run the CLI
                importlib.import_module(module.name)


def kind_of(message: str) -> str:
    """Failures of one kind end alike: a traceback's exception type and the line that raised it; else the
    message's first line without its figures."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if "Traceback" in message:
        raised = [line for line in lines if line.startswith("File ")]
        return f"{lines[-1].split(':')[0]} at {raised[-1] if raised else '?'}"
    return re.sub(r"\d+", "N", lines[0])


def save(cases: Path, door: str, saved: bytes) -> Path:
    path = cases / door / f"{hashlib.sha256(saved).hexdigest()[:16]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(saved)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("doors", nargs="+", help="door names (tests/doors.py), or all")
    parser.add_argument("--examples", type=int, default=1000, help="examples per door at most")
    parser.add_argument("--minutes", type=float, default=float("inf"), help="minutes per door at most")
    parser.add_argument("--engine", choices=["hypothesis", "atheris"], default="hypothesis",
                        help="random draws, or libFuzzer's coverage guidance (see above)")
    parser.add_argument("--cases", type=Path, default=CASES, help="where failures are saved (default: the suite's)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # fuzz_atheris's child: its status file
    args = parser.parse_args()
    if args.child:
        instrument_mt()
    from doors import DOORS, build_world

    names = list(DOORS) if args.doors == ["all"] else args.doors
    if unknown := [name for name in names if name not in DOORS]:
        parser.error(f"no door {', '.join(unknown)}; the doors: {', '.join(DOORS)}")
    if args.child:
        return atheris_child(names[0], args.examples, args.minutes * 60, args.child)
    with tempfile.TemporaryDirectory() as root:
        world = build_world(Path(root)) if args.engine == "hypothesis" else None
        print("| door | examples | failures | s per 1,000 |\n|---|---:|---:|---:|")
        rows = []
        with world.closing if world else contextlib.nullcontext():
            for name in names:
                if world:
                    result = fuzz_hypothesis(name, args.examples, args.minutes * 60, world)
                else:
                    result = fuzz_atheris(name, args.examples, args.minutes * 60)
                for saved, message in result["failures"].values():
                    if saved is None:  # a process that died between examples: nothing to replay
                        print(f"{name}: no example\n{message}\n", file=sys.stderr)
                        continue
                    path = save(args.cases, name, saved)
                    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    print(f"{name}: {shown}\n{message}\n", file=sys.stderr)
                rows.append({"door": name, "examples": result["examples"], "failures": len(result["failures"]),
                             "seconds": round(result["seconds"], 3)})
                if result.get("coverage"):
                    rows[-1].update(zip(("libFuzzer edges", "libFuzzer features", "inputs kept"),
                                        map(int, result["coverage"])))
                per_1000 = 1000 * rows[-1]["seconds"] / max(rows[-1]["examples"], 1)
                print(f"| {name} | {rows[-1]['examples']:,} | {rows[-1]['failures']} | {per_1000:.0f} |", flush=True)
        coverage = [f"{row['door']}: libFuzzer's coverage of mt: {row['libFuzzer edges']} edges, "
                    f"{row['libFuzzer features']} features, {row['inputs kept']} inputs kept"
                    for row in rows if "libFuzzer edges" in row]
        if coverage:
            print("\n" + "\n".join(coverage))
    budget = f"{args.examples:,} examples" + (f" or {args.minutes:g} minutes" if args.minutes != float("inf") else "")
    record("fuzz.py", f"fuzzing mt's doors, {args.engine}, {budget} a door", rows)


if __name__ == "__main__":
    main()
