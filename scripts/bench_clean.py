"""Corpus cleaning (data.filters, data.contamination, `mt clean`, `mt score`), measured. A report, not a test:
every figure is measured here, labelled with this machine's CPU.

Parts (--parts, a comma list; default all):

  tatoeba  The quick-start recipe (configs/tatoeba-cpu.yaml, its max_steps) trained four times into
           RUNS/{clean,noisy,noisy-cleaned,noisy-scored}: (a) clean Tatoeba, filters off and contamination kept;
           (b) the noisy Tatoeba of scripts/make_noisy_corpus.py (built into --noisy-dir if missing), filters off
           and contamination kept; (c) the noisy Tatoeba with the default filters and the contamination guard;
           (d) as (c), then the cross_entropy filter with (c)'s best.pt as its forward model, keeping
           --keep-fraction of the pairs reaching it. Each best.pt is scored on the Tatoeba test set with beam 4; a
           table gives pairs kept, train minutes, BLEU, chrF and the ratios to (a). Then `mt clean` on (c)'s and
           (d)'s configs: per kind of damage (the corpus's manifest.tsv, pairs matched by their exact text) the
           share each filter removed, and the share of clean pairs removed. A run directory whose run finished is
           reused; one with a last.pt continues (--resume); otherwise the run starts fresh: the script can be
           rerun after an interruption.
  tvsub    `mt clean` on TVsub's 2M pairs (configs/dialogue-cpu.yaml, its other corpora left out): wall time,
           peak memory, removals per filter. With --tvsub-train-minutes M, also trains the dialogue recipe for M
           minutes with and without filters and scores both on TVsub's dev set (beam 4).
  score    Sentences/s of `mt score` against `mt translate` (greedy and beam 4) on the Tatoeba test set.

    python scripts/bench_clean.py --parts tatoeba --threads 2          # about 4 × the quick-start's time
    python scripts/bench_clean.py --parts tvsub,score

Each part's figures go, as a record of their own, into benchmarks/results/bench_clean.jsonl (scripts/records.py).
--config layers a config over each part's recipe, and --data, --tvsub-dev and --checkpoint choose its data: with a
small model and corpus, the script runs through in seconds (a check of it, not a measurement).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from mt.clean.cleaning import step_names
from mt.data.filters import DEFAULT_FILTERS
from records import record  # scripts/records.py: the results file

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "zh-en"
TATOEBA = DATA / "tatoeba"
TVSUB = DATA / "tvsub"
QUICKSTART = "configs/tatoeba-cpu.yaml"
DIALOGUE = "configs/dialogue-cpu.yaml"
FILTERS_OFF = ["--set", "data.filters=[]", "--set", "data.contamination=keep"]
PARTS = ("tatoeba", "tvsub", "score")
TITLES = {"tatoeba": "the quick-start recipe on clean, noisy and filtered Tatoeba (test set, beam 4)",
          "tvsub": "mt clean on TVsub", "score": "mt score against mt translate on the Tatoeba test set"}
# The order of cleaning's steps in (c) and (d): the guard, the default filters, then cross_entropy.
STEPS = step_names([f.filter for f in DEFAULT_FILTERS] + ["cross_entropy"])
# A text found several times in the corpus: its removals are counted against the noisiest kinds first.
NOISE_ORDER = ("test", "boilerplate", "copy", "wrong-language", "misaligned", "glued", "duplicate", "clean")


class Failed(Exception):
    """A command of the benchmark failed: the message says which and why."""


# ---------------------------------------------------------------- machine and commands

def cpu_header() -> str:
    """The CPU's model name and whether it computes in bf16 natively (avx512_bf16, AMX)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "CPU: unknown (no lscpu)"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    name = fields.get("Model name", "unknown").strip()
    flags = set(fields.get("Flags", "").split())
    amx = sorted(f for f in flags if f.startswith("amx"))
    return (f"CPU: {name}; {os.cpu_count()} logical CPUs; avx512_bf16: {'yes' if 'avx512_bf16' in flags else 'no'}; "
            f"AMX: {', '.join(amx) if amx else 'no'}")


def mt_program() -> str:
    """The `mt` of this Python's environment."""
    beside = Path(sys.executable).parent / "mt"
    return str(beside) if beside.exists() else shutil.which("mt") or "mt"


def rel(path: Path) -> str:
    """A path as the commands show it: relative to the project root (where they run) when inside it."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return os.path.relpath(path, ROOT)


@dataclass
class Done:
    output: str  # stdout and stderr together
    seconds: float


def run_mt(args: list[str], env: dict, log: Path | None = None, echo: bool = True, timed: bool = False) -> Done:
    """Run `mt ARGS` in the project root, its lines echoed as they come and appended to `log`. `timed`: under
    /usr/bin/time -v (its report ends the output). A failure raises Failed with the command and its last lines."""
    command = [mt_program(), *args]
    if timed and Path("/usr/bin/time").exists():
        command = ["/usr/bin/time", "-v", *command]
    shown = "mt " + shlex.join(args)
    print("$ " + ("/usr/bin/time -v " if len(command) > len(args) + 1 else "") + shown, flush=True)
    lines: list[str] = []
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)  # a part's first command may be its first logged one
    log_file = open(log, "a", encoding="utf-8") if log else None
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, text=True, bufsize=1, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if echo:
                print("  | " + lines[-1].split("\r")[-1], flush=True)
            if log_file:
                log_file.write(line)
        rc = proc.wait()
        seconds = time.perf_counter() - start
        if log_file:
            log_file.write(f"# bench_clean: $ {shown} took {seconds:.1f} s, exit {rc}\n")
    finally:
        if log_file:
            log_file.close()
    if rc != 0:
        tail = "\n".join("    " + line for line in lines[-8:])
        raise Failed(f"`{shown}` failed (exit {rc}) after {seconds:.0f} s; its last lines:\n{tail}"
                     + (f"\n  (whole output: {rel(log)})" if log else ""))
    return Done("\n".join(lines), seconds)


def child_env(threads: int | None) -> dict:
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


# ---------------------------------------------------------------- training runs

@dataclass
class Run:
    name: str
    run_dir: Path
    log: Path  # everything mt train said, over every attempt (kept outside the run directory: mt refuses a
    #            non-empty directory that is not a run's)


def finished(run: Run) -> bool:
    """best.pt is there and the run ended: mt said "done:" (its last line), or log.jsonl reached max_steps."""
    if not (run.run_dir / "checkpoints" / "best.pt").exists():
        return False
    if run.log.exists() and re.search(r"^done: ", run.log.read_text(encoding="utf-8"), re.M):
        return True
    try:
        import yaml

        max_steps = yaml.safe_load((run.run_dir / "config.yaml").read_text(encoding="utf-8"))["train"]["max_steps"]
        steps = [json.loads(line).get("step", 0) for line in (run.run_dir / "log.jsonl").open(encoding="utf-8")]
        return max(steps, default=0) >= max_steps
    except (OSError, KeyError, TypeError, ValueError):
        return False


def recipe(args, config: str) -> list[str]:
    """The -c options of a part's recipe: its config, then those of --config."""
    return ["-c", config, *(option for layer in args.config for option in ("-c", layer))]


def train(run: Run, configs: list[str], overrides: list[str], env: dict) -> None:
    """Train the run, unless it finished before (reused); one that stopped part-way continues."""
    if finished(run):
        print(f"{run.name}: reusing the finished run in {rel(run.run_dir)}", flush=True)
        return
    resume = ["--resume"] if (run.run_dir / "checkpoints" / "last.pt").exists() else []
    if resume:
        print(f"{run.name}: continuing the unfinished run in {rel(run.run_dir)}", flush=True)
    run_mt(["train", *configs, "--run-dir", rel(run.run_dir), *overrides, *resume], env, run.log)


def train_minutes(run: Run) -> float | None:
    """Wall-clock minutes of every `mt train` attempt in the run's log (data preparation and validations
    included); None for a run trained elsewhere."""
    if not run.log.exists():
        return None
    seconds = re.findall(r"^# bench_clean: \$ mt train .* took ([\d.]+) s", run.log.read_text(encoding="utf-8"),
                         re.M)
    return sum(map(float, seconds)) / 60 if seconds else None


def pairs_kept(log_text: str, corpus: str = "train") -> tuple[int, int] | None:
    """(pairs read, pairs kept) from the corpus's report lines in mt's log: cleaning's "train: cleaning kept 29,858
    of 39,987 pairs (…)" when it ran, then the length filter's "train: 29,858 pairs, kept 29,850 (…)"."""
    read = re.search(rf"^{re.escape(corpus)}: cleaning kept [\d,]+ of ([\d,]+) pairs", log_text, re.M)
    kept = re.findall(rf"^{re.escape(corpus)}: ([\d,]+) pairs, kept ([\d,]+)", log_text, re.M)
    if not kept:
        return None
    total = read.group(1) if read else kept[0][0]
    return int(total.replace(",", "")), int(kept[-1][1].replace(",", ""))


def evaluate(checkpoint: Path, src: Path, ref: Path, output: Path, env: dict) -> tuple[float, float]:
    """(BLEU, chrF) of the checkpoint with beam 4; translations kept in `output`, and only scored again when
    they are newer than the checkpoint."""
    if output.exists() and output.stat().st_mtime > checkpoint.stat().st_mtime:
        done = run_mt(["evaluate", "--hyp", rel(output), "--ref", rel(ref)], env)
    else:
        done = run_mt(["evaluate", "--checkpoint", rel(checkpoint), "--src", rel(src), "--ref", rel(ref),
                       "--beam", "4", "--output", rel(output)], env)
    scores = dict(re.findall(r"^(BLEU|chrF) ([\d.]+)", done.output, re.M))
    if len(scores) != 2:
        raise Failed(f"mt evaluate printed no BLEU and chrF lines:\n{done.output[-500:]}")
    return float(scores["BLEU"]), float(scores["chrF"])


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def fmt(value, spec: str, missing: str = "?") -> str:
    return missing if value is None else format(value, spec)


# ---------------------------------------------------------------- removed.tsv and the manifest

def read_removed(path: Path) -> list[tuple[str, str, str]]:
    """RUN/clean/removed.tsv (written by Python's csv module, with a header row) as (reason, source, target)."""
    with open(path, encoding="utf-8", newline="") as f:
        return [(row["reason"], row["source"], row["target"]) for row in csv.DictReader(f, delimiter="\t")]


def read_manifest(noisy: Path) -> list[tuple[str, str, str]]:
    """The noisy corpus's pairs as (source, target, kind), in line order."""
    def lines(name: str) -> list[str]:
        return (noisy / name).read_text(encoding="utf-8").split("\n")[:-1]

    kinds = [row.split("\t")[1] for row in lines("manifest.tsv")[1:]]
    return list(zip(lines("train.zh"), lines("train.en"), kinds))


def removals_by_kind(pairs: list[tuple[str, str, str]], removed: list[tuple[str, str, str]]):
    """Counter of (kind, reason) over the removed pairs, matched to the corpus by their exact text (a text found
    n times takes up to n removals, the noisiest kinds first, the removals in the order of the cleaning's STEPS);
    also the removals matching no pair, and the clean removals whose text is in the corpus as another clean pair
    too (Tatoeba's own repeats)."""
    kinds = defaultdict(list)
    for src, tgt, kind in pairs:
        kinds[src, tgt].append(kind)
    for found in kinds.values():
        found.sort(key=lambda kind: NOISE_ORDER.index(kind) if kind in NOISE_ORDER else -1)
    counts, unmatched, repeats, taken = Counter(), 0, 0, Counter()
    for reason, src, tgt in sorted(removed, key=lambda pair: STEPS.index(pair[0])):
        found, i = kinds.get((src, tgt), []), taken[src, tgt]
        taken[src, tgt] += 1
        if i >= len(found):
            unmatched += 1
            continue
        counts[found[i], reason] += 1
        repeats += found[i] == "clean" and found.count("clean") > 1
    return counts, unmatched, repeats


def recall(run: str, pairs, removed) -> list[dict]:
    """Prints, and returns as rows, the share of each kind of pair that each filter removed."""
    counts, unmatched, repeats = removals_by_kind(pairs, removed)
    totals = Counter(kind for _, _, kind in pairs)
    reasons = [r for r, _ in Counter(reason for reason, _, _ in removed).most_common()]
    rows = []
    for kind in [k for k in NOISE_ORDER[::-1] if totals[k]] + sorted(set(totals) - set(NOISE_ORDER)):
        n = totals[kind]
        gone = sum(c for (k, _), c in counts.items() if k == kind)
        rows.append({"part": "tatoeba", "run": run, "kind": kind, "pairs": n, "removed": gone,
                     "removed %": round(100 * gone / n, 1),
                     **{f"{r} %": round(100 * counts[kind, r] / n, 1) for r in reasons}})
    width = max([8] + [len(r) for r in reasons])
    print(f"\nshare of each kind removed, by filter (removed.tsv: {len(removed):,} pairs; a column per reason; a pair "
          "counts under the first step that removed it: the contamination guard, then the filters in order):")
    print(f"{'kind':<15}{'pairs':>8}{'removed':>9}" + "".join(f"{r:>{width + 1}}" for r in reasons))
    for row in rows:
        print(f"{row['kind']:<15}{row['pairs']:>8,}{row['removed %']:>8.1f}%"
              + "".join(f"{row[f'{r} %']:>{width}.1f}%" for r in reasons))
    clean = next((row for row in rows if row["kind"] == "clean"), {"pairs": 0, "removed": 0})
    clean["exact repeats of another clean pair"] = repeats
    print(f"clean pairs removed (false positives): {clean['removed']:,} of {clean['pairs']:,} "
          f"({100 * clean['removed'] / max(clean['pairs'], 1):.2f}%), {repeats:,} of them exact repeats of another "
          "clean pair")
    if unmatched:
        print(f"warning: {unmatched:,} removed pairs match no pair of the corpus by their exact text")
    return rows


# ---------------------------------------------------------------- part: tatoeba

def ensure_noisy(noisy: Path, seed: int, data: Path) -> None:
    if all((noisy / name).exists() for name in ("train.zh", "train.en", "manifest.tsv")):
        print(f"noisy corpus: reusing {rel(noisy)} (from a previous run; its seed is not checked)")
        return
    args = ["scripts/make_noisy_corpus.py", "--out", rel(noisy), "--seed", str(seed), "--data", rel(data)]
    print("$ python " + shlex.join(args), flush=True)
    if subprocess.run([sys.executable, *args], cwd=ROOT).returncode:
        raise Failed("scripts/make_noisy_corpus.py failed")


def part_tatoeba(args, env: dict) -> list[dict]:
    print("\n## Tatoeba: clean, noisy, noisy with filters (quick-start recipe; test set, beam 4)", flush=True)
    ensure_noisy(args.noisy_dir, args.seed, args.data)
    noisy_train = ["--set", f"data.train.path={rel(args.noisy_dir / 'train')}"]
    # (d) scores the noisy corpus with (c)'s own model: what a user holding only the noisy corpus can do.
    scored = ["--set", f"data.filters={cross_entropy_filters(args.runs_dir / 'noisy-cleaned', args.keep_fraction)}"]
    runs = [("(a) clean", "clean", FILTERS_OFF), ("(b) noisy", "noisy", noisy_train + FILTERS_OFF),
            ("(c) noisy, filtered", "noisy-cleaned", noisy_train),
            ("(d) (c) + cross_entropy", "noisy-scored", noisy_train + scored)]
    rows = []
    for label, name, overrides in runs:
        run = Run(label, args.runs_dir / name, args.runs_dir / "logs" / f"{name}.train.log")
        train(run, recipe(args, QUICKSTART), overrides, env)
        best = run.run_dir / "checkpoints" / "best.pt"
        bleu, chrf = evaluate(best, args.data / "test.zh", args.data / "test.en", run.run_dir / "test.beam4.en", env)
        kept = pairs_kept(run.log.read_text(encoding="utf-8") if run.log.exists() else "")
        minutes = train_minutes(run)
        rows.append({"part": "tatoeba", "run": label, "pairs read": kept and kept[0], "pairs kept": kept and kept[1],
                     "train minutes": minutes and round(minutes, 1), "test BLEU (beam 4)": bleu,
                     "test chrF (beam 4)": chrf})
    for row in rows:
        row.update({f"{score}/(a)": ratio(row[f"test {score} (beam 4)"], rows[0][f"test {score} (beam 4)"])
                    for score in ("BLEU", "chrF")})
    print_tatoeba_table(rows)
    pairs = read_manifest(args.noisy_dir)
    for label, name, overrides in runs[2:]:
        clean_dir = args.runs_dir / name
        done = run_mt(["clean", *recipe(args, QUICKSTART), *overrides, "--set", f"train.run_dir={rel(clean_dir)}"],
                      env, args.runs_dir / "logs" / f"{name}.clean.log")
        cleaned = {"part": "tatoeba", "run": f"mt clean of {label}", "seconds": round(done.seconds, 1)}
        print(f"\n{cleaned['run']}: {cleaned['seconds']:.1f} s wall; report: {rel(clean_dir / 'clean' / 'report.md')}")
        rows += [cleaned, *recall(cleaned["run"], pairs, read_removed(clean_dir / "clean" / "removed.tsv"))]
    return rows


def cross_entropy_filters(scorer: Path, keep_fraction: float) -> str:
    """data.filters as YAML: the defaults, then cross_entropy with scorer's best.pt as the forward model."""
    filters = [asdict(f) for f in DEFAULT_FILTERS]
    filters.append({"filter": "cross_entropy", "forward": rel(scorer / "checkpoints" / "best.pt"),
                    "keep_fraction": keep_fraction})
    return json.dumps(filters)


def print_tatoeba_table(rows: list[dict]) -> None:
    print(f"\n{'run':<26}{'pairs kept/read':>18}{'train min':>10}{'BLEU':>8}{'chrF':>8}{'BLEU/(a)':>10}"
          f"{'chrF/(a)':>10}")
    for row in rows:
        pairs = f"{row['pairs kept']:,}/{row['pairs read']:,}" if row["pairs read"] is not None else "?"
        print(f"{row['run']:<26}{pairs:>18}{fmt(row['train minutes'], '.1f'):>10}{row['test BLEU (beam 4)']:>8.2f}"
              f"{row['test chrF (beam 4)']:>8.2f}{fmt(row['BLEU/(a)'], '.3f', 'nan'):>10}"
              f"{fmt(row['chrF/(a)'], '.3f', 'nan'):>10}")
    print("(pairs: of the train corpus, read and kept after the filters and the length filter, from mt train's log; "
          "minutes: wall-clock of mt train, data preparation and validations included)")


# ---------------------------------------------------------------- part: tvsub

def ensure_tvsub_dev(out: Path) -> None:
    """OUT/dev.{zh,en} (data/tvsub/, which configs/dialogue-cpu.yaml validates on), made as
    scripts/bench_dialogue.sh makes them (references detokenised with sacremoses)."""
    if (out / "dev.zh").exists() and (out / "dev.en").exists():
        return
    try:
        from sacremoses import MosesDetokenizer
    except ImportError:
        raise Failed(f'{rel(out)}/dev is missing and making it needs sacremoses: pip install -e ".[bench]"')
    out.mkdir(parents=True, exist_ok=True)
    detokenize = MosesDetokenizer(lang="en").detokenize
    lines = (TVSUB / "dev.en").read_text(encoding="utf-8").split("\n")[:-1]
    (out / "dev.en").write_text("".join(detokenize(line.split()) + "\n" for line in lines), encoding="utf-8")
    shutil.copyfile(TVSUB / "dev.zh", out / "dev.zh")
    print(f"made {rel(out)}/dev.{{zh,en}} (TVsub dev, references detokenised)")


def peak_memory_mb(done: Done) -> tuple[float, str]:
    """The child's peak resident memory: /usr/bin/time -v's report, else getrusage over the children so far."""
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.output)
    if found:
        return int(found.group(1)) / 1024, "/usr/bin/time -v"
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "getrusage(RUSAGE_CHILDREN)"


def part_tvsub(args, env: dict) -> list[dict]:
    print("\n## TVsub: mt clean on 2M pairs", flush=True)
    ensure_tvsub_dev(args.tvsub_dev)
    clean_dir = args.runs_dir / "tvsub-clean"
    done = run_mt(["clean", *recipe(args, DIALOGUE), "--set", "data.extra_train=[]", *tvsub_dev(args), "--set",
                   f"train.run_dir={rel(clean_dir)}"], env, args.runs_dir / "logs" / "tvsub.clean.log", timed=True)
    peak, how = peak_memory_mb(done)
    removed = read_removed(clean_dir / "clean" / "removed.tsv")
    rows = [{"part": "tvsub", "run": "mt clean, TVsub alone", "seconds": round(done.seconds, 1),
             "peak memory MB": round(peak), "pairs removed": len(removed)}]
    print(f"\n{rows[0]['run']}: {rows[0]['seconds']:.1f} s wall, peak memory {rows[0]['peak memory MB']:,} MB "
          f"({how}); {rows[0]['pairs removed']:,} pairs removed")
    for reason, n in Counter(reason for reason, _, _ in removed).most_common():
        rows.append({"part": "tvsub", "run": "mt clean, TVsub alone", "filter": reason, "pairs removed": n})
        print(f"  {reason:<24}{n:>10,}")
    print(f"report: {rel(clean_dir / 'clean' / 'report.md')}")
    return rows + (tvsub_training(args, env) if args.tvsub_train_minutes else [])


def tvsub_dev(args) -> list[str]:
    """The override that validates the dialogue recipe on --tvsub-dev (its config's own by default)."""
    return ["--set", f"data.dev.path={rel(args.tvsub_dev / 'dev')}"]


def tvsub_training(args, env: dict) -> list[dict]:
    minutes = args.tvsub_train_minutes
    print(f"\n## TVsub: configs/dialogue-cpu.yaml trained {minutes:g} minutes with and without filters "
          "(dev: TVsub dev, detokenised; beam 4)", flush=True)
    rows = []
    for label, overrides in (("filters off", FILTERS_OFF), ("default filters", [])):
        name = f"tvsub-{'unfiltered' if overrides else 'filtered'}-{minutes:g}min"
        run = Run(label, args.runs_dir / name, args.runs_dir / "logs" / f"{name}.train.log")
        train(run, recipe(args, DIALOGUE), ["--set", f"train.max_minutes={minutes:g}", *tvsub_dev(args), *overrides],
              env)
        bleu, chrf = evaluate(run.run_dir / "checkpoints" / "best.pt", args.tvsub_dev / "dev.zh",
                              args.tvsub_dev / "dev.en", run.run_dir / "dev.beam4.en", env)
        kept = pairs_kept(run.log.read_text(encoding="utf-8")) if run.log.exists() else None
        rows.append({"part": "tvsub", "run": label, "train minutes": minutes, "pairs kept": kept and kept[1],
                     "dev BLEU (beam 4)": bleu, "dev chrF (beam 4)": chrf})
    for row in rows:
        print(f"{row['run']:<17} TVsub pairs kept {fmt(row['pairs kept'], ',')}: dev BLEU "
              f"{row['dev BLEU (beam 4)']:.2f}, chrF {row['dev chrF (beam 4)']:.2f}")
    return rows


# ---------------------------------------------------------------- part: score

def first_pair(folder: Path, data: Path) -> tuple[Path, Path]:
    """The test set's first pair alone, in FOLDER/one.{zh,en}: the command's start-up is timed on it."""
    paths = (folder / "one.zh", folder / "one.en")
    for lang, path in zip(("zh", "en"), paths):
        path.write_text((data / f"test.{lang}").read_text(encoding="utf-8").split("\n")[0] + "\n",
                        encoding="utf-8")
    return paths


def rate(make, n: int, folder: Path, data: Path, name: str, env: dict) -> tuple[float, float | None, str]:
    """(sentences/s of the whole command, sentences/s without its start-up, its last log line) on the test set
    in `data`, where make(src, tgt, out) gives the mt arguments."""
    done = []
    for (src, tgt), out in ((first_pair(folder, data), folder / f"one.{name}"),
                            ((data / "test.zh", data / "test.en"), folder / name)):
        done.append(run_mt(make(src, tgt, out), env, echo=False))
    lines = len((folder / name).read_text(encoding="utf-8").splitlines())
    if lines != n:
        print(f"warning: {name}: {lines:,} lines for {n:,} pairs")
    last = (done[1].output.strip().splitlines() or [""])[-1]
    net = done[1].seconds - done[0].seconds  # nothing left on a test set too small to outlast the start-up's jitter
    return n / done[1].seconds, (n - 1) / net if net > 0 else None, last


def part_score(args, env: dict) -> list[dict]:
    checkpoint = args.checkpoint
    if not checkpoint.exists():
        raise Failed(f"{rel(checkpoint)}: no such checkpoint (train the quick-start, or give --checkpoint)")
    n = len((args.data / "test.zh").read_text(encoding="utf-8").split("\n")) - 1
    folder = args.runs_dir / "score"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\n## Scoring speed: {n:,} Tatoeba test pairs, {rel(checkpoint)}", flush=True)

    def translate(beam: int):
        return lambda src, tgt, out: ["translate", "--checkpoint", rel(checkpoint), "--input", rel(src),
                                      "--output", rel(out), "--beam", str(beam), "--no-split"]

    def score(src, tgt, out):
        return ["score", "--checkpoint", rel(checkpoint), "--src", rel(src), "--tgt", rel(tgt), "--output", rel(out)]

    src, _ = first_pair(folder, args.data)
    print("warm-up (untimed): ", end="")
    run_mt(translate(1)(src, None, folder / "warm-up.en"), env, echo=False)  # files into the page cache
    rates = {"mt translate, greedy": rate(translate(1), n, folder, args.data, "greedy.en", env),
             "mt translate, beam 4": rate(translate(4), n, folder, args.data, "beam4.en", env),
             "mt score": rate(score, n, folder, args.data, "scores.txt", env)}
    rows = [{"part": "score", "run": label, "sentences/s": round(whole, 1),
             "sentences/s without start-up": net and round(net, 1)} for label, (whole, net, _) in rates.items()]
    for row in rows:
        print(f"{row['run']:<22}{row['sentences/s']:>9.1f} sent/s whole command"
              f"{fmt(row['sentences/s without start-up'], '.1f', 'nan'):>9} sent/s without start-up")
    print("(start-up: the same command on the first pair alone, subtracted)")
    print(f"mt score's own report: {rates['mt score'][2]}")
    return rows


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)} (default all)")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "bench-clean",
                        help="where the runs, mt clean's reports and the logs go")
    parser.add_argument("--noisy-dir", type=Path, default=ROOT / "data" / "noisy-tatoeba",
                        help="the noisy Tatoeba (built by scripts/make_noisy_corpus.py if missing)")
    parser.add_argument("--seed", type=int, default=1, help="the noisy corpus's seed, when it is built")
    parser.add_argument("--keep-fraction", type=float, default=0.88,
                        help="(d)'s cross_entropy filter keeps this share of the pairs reaching it")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for every mt command")
    parser.add_argument("--tvsub-train-minutes", type=float, default=0,
                        help="tvsub: also train the dialogue recipe this long with and without filters (0: skip)")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "runs" / "tatoeba-cpu" / "checkpoints" / "best.pt",
                        help="score: the model")
    parser.add_argument("--config", action="append", default=[], metavar="CONFIG",
                        help="a config layered over each part's recipe (repeatable), e.g. a small model and corpus")
    parser.add_argument("--data", type=Path, default=TATOEBA,
                        help="tatoeba, score: the Tatoeba folder (test.{zh,en}; train.{zh,en} for the noisy corpus)")
    parser.add_argument("--tvsub-dev", type=Path, default=ROOT / "data" / "tvsub",
                        help="tvsub: where TVsub's dev set goes, detokenised, and the dialogue recipe validates on")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if unknown := [p for p in parts if p not in PARTS]:
        parser.error(f"--parts: unknown {', '.join(unknown)} (choose from {', '.join(PARTS)})")
    args.runs_dir, args.noisy_dir, args.data, args.tvsub_dev = (
        path.resolve() for path in (args.runs_dir, args.noisy_dir, args.data, args.tvsub_dev))
    args.config = [rel(Path(config)) for config in args.config]  # the commands run in the project root
    env = child_env(args.threads)
    print("$ python " + shlex.join(["scripts/bench_clean.py", *sys.argv[1:]]))
    print(f"# mt corpus cleaning bench. {cpu_header()}; OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', 'unset')}")
    started = time.perf_counter()
    try:
        for part in parts:
            rows = {"tatoeba": part_tatoeba, "tvsub": part_tvsub, "score": part_score}[part](args, env)
            record("bench_clean.py", f"corpus cleaning, {TITLES[part]}", rows)
    except Failed as e:
        sys.exit(f"bench_clean: {e}")
    print(f"\ntotal {(time.perf_counter() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
