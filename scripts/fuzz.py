"""Fuzz `mt`'s doors (tests/doors.py) for N examples or T minutes each, and save every distinct failure as a
regression case under tests/fuzz_cases/DOOR/, which the test suite replays. Prints, per door, the examples run, the
failures and the time per 1,000 examples.

    python scripts/fuzz.py all --examples 10000
    python scripts/fuzz.py checkpoint http --minutes 5
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, given, settings  # noqa: E402

from doors import DOORS, Door, Failure, World, build_world, encode  # noqa: E402

CASES = ROOT / "tests" / "fuzz_cases"
BATCH = 200  # examples per Hypothesis run; runs repeat, each with fresh random draws, until the budget is spent


def fuzz(door: Door, world: World, examples: int, seconds: float) -> dict:
    """Run `door` until `examples` or `seconds` are spent; return the counts and the failures by kind."""
    failures: dict[str, tuple[bytes, str]] = {}  # kind → (the smallest input of that kind, its message)
    count = 0
    start = time.perf_counter()

    def check(example):
        nonlocal count
        count += 1
        try:
            door.check(world, example)
        except Failure as e:
            saved, message = encode(example), str(e)
            kind = kind_of(message)
            if kind not in failures or len(saved) < len(failures[kind][0]):
                failures[kind] = saved, message

    while count < examples and time.perf_counter() - start < seconds:
        settings(max_examples=min(BATCH, examples - count), deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))(given(door.strategy(world))(check))()
    return {"examples": count, "seconds": time.perf_counter() - start, "failures": failures}


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
    parser.add_argument("doors", nargs="+", help=f"door names, or all: {', '.join(DOORS)}")
    parser.add_argument("--examples", type=int, default=1000, help="examples per door at most")
    parser.add_argument("--minutes", type=float, default=float("inf"), help="minutes per door at most")
    parser.add_argument("--cases", type=Path, default=CASES, help="where failures are saved (default: the suite's)")
    args = parser.parse_args()
    names = list(DOORS) if args.doors == ["all"] else args.doors
    if unknown := [name for name in names if name not in DOORS]:
        parser.error(f"no door {', '.join(unknown)}; the doors: {', '.join(DOORS)}")
    with tempfile.TemporaryDirectory() as root:
        world = build_world(Path(root))
        print("| door | examples | failures | s per 1,000 |\n|---|---:|---:|---:|")
        with world.closing:
            for name in names:
                result = fuzz(DOORS[name], world, args.examples, args.minutes * 60)
                for saved, message in result["failures"].values():
                    path = save(args.cases, name, saved)
                    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    print(f"{name}: {shown}\n{message}\n", file=sys.stderr)
                per_1000 = 1000 * result["seconds"] / max(result["examples"], 1)
                print(f"| {name} | {result['examples']:,} | {len(result['failures'])} | {per_1000:.0f} |", flush=True)


if __name__ == "__main__":
    main()
