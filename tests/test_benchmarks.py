"""Every benchmark script of scripts/, run once end to end as a user runs it, on a tiny budget: a model of 40k
weights, 300 Tatoeba pairs, a fraction of a second of training or a few requests of serving. Each must exit 0 and
print its figures; what the figures are is not checked, only that they are there, so that a script that breaks
shows here rather than on the day of a benchmark. Scripts that compare with the peers' toolkits run without them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import ROOT, tiny_yaml, write_lines
from mt.core.device import has_native_bf16
from mt.exchange.checkpoint import load_checkpoint

SCRIPTS = ROOT / "scripts"
PEERS = ROOT.parent / "shared" / "bench" / "peers"
NUMBER = r"[\d,]+(?:\.\d+)?"
sys.path.insert(0, str(SCRIPTS))  # scripts/ is not a package
from records import read as read_records  # noqa: E402
# One thread per process: the models are tiny, and on a 2-core machine that something else is using, a second
# OpenMP thread waits at every barrier for a core (tiny training steps went from 6 ms to a second).
THREADS = {"OMP_NUM_THREADS": "1", "BENCH_THREADS": "1"}


def recorded(tmp_path: Path, script: str, command: str = "python") -> list[dict]:
    """The records a script's run appended to its results file (scripts/records.py), each with its machine."""
    entries = read_records(tmp_path / "results" / f"{script}.jsonl")
    for entry in entries:
        assert entry["source"] == "measured" and entry["machine"]["cores"] and entry["machine"]["gemm_gflops"] > 0
        assert entry["command"].startswith(command) and len(entry["commit"]) == 40
    return entries


def run(script: str, *args: str, tmp_path: Path, env: dict | None = None) -> str:
    """`python scripts/SCRIPT ARGS` (or `bash` for a .sh) in the project root, as a user runs it; its stdout, after
    checking that it exited 0. Its temporary files go under tmp_path."""
    command = ["bash" if script.endswith(".sh") else sys.executable, str(SCRIPTS / script), *args]
    temporary = tmp_path / "tmp"
    temporary.mkdir(exist_ok=True)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **THREADS, "TMPDIR": str(temporary), "PYTHONDONTWRITEBYTECODE": "1",
                               "MT_RESULTS": str(tmp_path / "results"), **(env or {})})
    assert done.returncode == 0, (f"{' '.join(command)} exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\n"
                                  f"stderr:\n{done.stderr[-3000:]}")
    return done.stdout


def lines_like(pattern: str, output: str) -> list[str]:
    return re.findall(f"^{pattern}$", output, re.M)


@pytest.fixture(scope="module")
def checkpoint(trained_runs) -> Path:
    return trained_runs[0] / "checkpoints" / "best.pt"


@pytest.fixture
def config(corpus_dir, tmp_path) -> Path:
    """A recipe small enough to train in a second: the tiny model on 300 pairs, validated every 10 updates."""
    path = tmp_path / "tiny.yaml"
    path.write_text(tiny_yaml(corpus_dir, tmp_path / "run"), encoding="utf-8")
    return path


def bleu_lines(output: str) -> list[str]:
    return lines_like(rf"BLEU {NUMBER} .*", output)


# --- the training recipes (bash) --------------------------------------------------------------------------------

def test_quickstart(config, tmp_path):
    out = run("quickstart.sh", tmp_path=tmp_path, env={"CONFIG": str(config), "RUN_DIR": str(tmp_path / "qs")})
    assert '$ mt translate "我爱你"' in out and len(bleu_lines(out)) == 1
    assert (tmp_path / "qs" / "test.hyp.en").exists()
    [entry] = recorded(tmp_path, "quickstart", command="bash scripts/quickstart.sh")
    assert entry["figures"][0]["training seconds"] >= 0 and entry["figures"][0]["test BLEU (beam 4)"] >= 0
    run("quickstart.sh", tmp_path=tmp_path, env={"CONFIG": str(config), "RUN_DIR": str(tmp_path / "qs")})
    assert len(recorded(tmp_path, "quickstart", command="bash")) == 1  # a run that continued records no time


def test_bench_quality_adapts_to_the_checkpoints_its_minutes_gave(config, corpus_dir, tmp_path):
    """Stopped on time after a few updates: one step checkpoint or a few, and the script chooses among what it got.
    One length penalty instead of two: each is a dev evaluation more."""
    out = run("bench_quality.sh", str(tmp_path / "quality"), tmp_path=tmp_path,
              env={"MINUTES": "0.001", "ALPHAS": "0.6", "CONFIG": str(config), "DATA": str(corpus_dir)})
    assert lines_like(rf"dev BLEU, best\.pt, beam 5, alpha 0\.6: {NUMBER}", out)
    assert lines_like(r"chosen on dev: (best|average)\.pt, alpha 0\.6", out)
    assert len(bleu_lines(out)) == 3 and len(lines_like(r"greedy outputs that loop: \d+ of 20.*", out)) == 2
    [entry] = recorded(tmp_path, "bench_quality", command="MINUTES=0.001 ")
    figures = entry["figures"][0]
    assert figures["test, beam 5: BLEU"] >= 0 and figures["length penalty chosen on dev"] == 0.6
    assert 0 <= figures["test, greedy: outputs that loop"] <= 20 and figures["updates"] > 0


@pytest.mark.skipif(importlib.util.find_spec("sacremoses") is None,
                    reason="needs sacremoses (pip install -e '.[bench]'), which the script would install")
def test_bench_dialogue(config, corpus_dir, tmp_path):
    """Tatoeba's dev set stands in for TVsub's (detokenising it changes little), and the run stops on time."""
    out = run("bench_dialogue.sh", str(tmp_path / "dialogue"), tmp_path=tmp_path,
              env={"MINUTES": "0.001", "CONFIG": str(config), "TVSUB": str(corpus_dir), "DEV": str(tmp_path / "dev"),
                   "TATOEBA": str(corpus_dir), "SET": "train.max_steps=1000000"})
    assert "TVsub dev references, detokenised: " in out and "== Tatoeba test, beam 5" in out
    assert len(bleu_lines(out)) == 2
    [entry] = recorded(tmp_path, "bench_dialogue", command="MINUTES=0.001 ")
    figures = entry["figures"][0]
    assert figures["TVsub dev, beam 5: BLEU"] >= 0 and figures["Tatoeba test, beam 5: chrF"] >= 0


def test_bench_hour(config, corpus_dir, tmp_path):
    """Both stages on the tiny recipe (SET's max_steps stops the first before its minutes), the dialogue stage given
    what TOTAL leaves after preparing; then the choice on dev and the test scores of the fine-tuned model and of the
    dialogue stage alone."""
    out = run("bench_hour.sh", str(tmp_path / "hour"), tmp_path=tmp_path,
              env={"TOTAL": "3", "FINETUNE": "0.001", "CONFIG": str(config), "TUNE_CONFIG": str(config),
                   "DATA": str(corpus_dir), "SET": "train.max_steps=10"})
    assert lines_like(rf"prepared in {NUMBER} minutes; the dialogue stage gets {NUMBER} minutes", out)
    assert lines_like(rf"trained in {NUMBER} minutes of wall-clock, preparation included", out)
    assert lines_like(rf"dev BLEU, best\.pt, beam 5, alpha 0\.6: {NUMBER}", out)
    assert lines_like(r"chosen on dev: (best|average)\.pt, alpha 0\.6", out) and len(bleu_lines(out)) == 2
    assert (tmp_path / "hour" / "tatoeba" / "checkpoints" / "best.pt").exists()
    [entry] = recorded(tmp_path, "bench_hour", command="TOTAL=3 FINETUNE=0.001 ")
    figures = entry["figures"][0]
    assert figures["Tatoeba test, beam 5: BLEU"] >= 0
    assert figures["the dialogue stage alone, Tatoeba test, beam 5: chrF"] >= 0
    assert figures["preparation minutes"] >= 0 and figures["checkpoint chosen on dev"] in ("best.pt", "average.pt")


def test_bench_hour_refuses_a_total_with_no_time_for_the_first_stage(config, corpus_dir, tmp_path):
    done = subprocess.run(["bash", str(SCRIPTS / "bench_hour.sh"), str(tmp_path / "hour")], cwd=ROOT, text=True,
                          capture_output=True, timeout=300,
                          env={**os.environ, **THREADS, "TOTAL": "1", "FINETUNE": "0.5", "CONFIG": str(config),
                               "DATA": str(corpus_dir)})
    assert done.returncode == 2 and "leaves no time for the dialogue stage" in done.stdout
    assert not (tmp_path / "hour").exists()  # refused before preparing anything


@pytest.fixture
def build_on_data(corpus_dir, tmp_path) -> Path:
    """DATA for bench_build_on.sh: the tiny corpus as tatoeba/, its last 10 test pairs as ntrex128/."""
    data = tmp_path / "data"
    (data / "tatoeba").mkdir(parents=True)
    (data / "ntrex128").mkdir()
    for split in ("train", "dev", "test"):
        for lang in ("zh", "en"):
            (data / "tatoeba" / f"{split}.{lang}").symlink_to(corpus_dir / f"{split}.{lang}")
    for name, lang in (("ntrex128.zho-CN.zh", "zh"), ("ntrex128.eng.en", "en")):
        lines = (corpus_dir / f"test.{lang}").read_text(encoding="utf-8").splitlines()[-10:]
        write_lines(data / "ntrex128" / name, lines)
    return data


def test_bench_build_on(config, build_on_data, tmp_path):
    """The subword part, the cheapest (one recipe, three evaluations): `ensemble` trains three models and
    `finetune` two on top of a dialogue run, through the same recipe() and score()."""
    data = build_on_data
    out = run("bench_build_on.sh", "subword", "0.1", tmp_path=tmp_path,
              env={"OUT": str(tmp_path / "build-on"), "CONFIG": str(config), "STEPS": "10", "DATA": str(data)})
    assert "== sampling_alpha 0.1, tatoeba dev, beam 5" in out and "== sampling_alpha 0.1, ntrex128, beam 5" in out
    assert len(bleu_lines(out)) == 3 and lines_like(r"   \(\d+ s to translate and score 10 lines\)", out)
    [entry] = recorded(tmp_path, "bench_build_on", command="OUT=")
    figures = entry["figures"][0]
    assert figures["sampling_alpha 0.1, tatoeba dev: BLEU"] >= 0
    assert figures["sampling_alpha 0.1, ntrex128: seconds"] >= 0


def test_bench_build_on_distill(config, build_on_data, tmp_path):
    """Three teachers, the distilled corpus, both student presets over the recipe, four scores and the speed table;
    then the students on the human pairs beside the teacher's. A student's corpus is the teacher's translation of
    every training source. (Teachers of 4 updates say nothing unless made to: --min-len, and no cleaning of what they
    say.)"""
    deeper = tmp_path / "deeper.yaml"  # two decoder layers: student-tiny takes the teachers' last
    deeper.write_text(config.read_text(encoding="utf-8").replace("num_decoder_layers: 1", "num_decoder_layers: 2"),
                      encoding="utf-8")
    env = {"OUT": str(tmp_path / "build-on"), "CONFIG": str(deeper), "STEPS": "4", "TINY_STEPS": "6",
           "DATA": str(build_on_data), "SENTENCES": "3", "REPEATS": "1", "DISTILL": "--min-len 3",
           "SET": "data.filters=[]"}
    out = run("bench_build_on.sh", "distill", tmp_path=tmp_path, env={**env, "ENGINES": "mt,ctranslate2 int8"})
    last = load_checkpoint(tmp_path / "build-on" / "student-tiny" / "checkpoints" / "last.pt")
    assert last.position.step == 6 and load_checkpoint(tmp_path / "build-on" / "student-base" / "checkpoints" /
                                                       "last.pt").position.step == 4
    tiny = last.init_from
    first_teacher = tmp_path / "build-on" / "seed1" / "checkpoints" / "best.pt"
    assert tiny["checkpoint"] == str(first_teacher.resolve()) and tiny["layers"] == {"decoder": [1]}
    train = (build_on_data / "tatoeba" / "train.zh").read_text(encoding="utf-8").splitlines()
    distilled = tmp_path / "build-on" / "distilled"
    assert (distilled / "train.zh").read_text(encoding="utf-8").splitlines() == [line for line in train if line]
    assert len((distilled / "train.en").read_text(encoding="utf-8").splitlines()) == len(train)
    assert lines_like(rf"== the teacher translated {len(train)} sources in \d+ s \(less where .*\)", out)
    for name in ("teacher: ensemble of seeds 1, 2, 3", "seed 1: the students' recipe on the human pairs",
                 "student-base", "student-tiny", "student-tiny with its shortlist"):
        assert f"== {name}, tatoeba, beam 5" in out
    assert len(bleu_lines(out)) == 5
    assert (tmp_path / "build-on" / "student-tiny" / "shortlist.pt").is_file()
    # bench_decode.py with three checkpoints: each engine of ENGINES a row per model, then the students' speed as
    # ratios (test_bench_decode times every engine)
    assert "ctranslate2 float32" not in out
    for engine in ("mt", "ctranslate2 int8"):
        for mode in ("greedy", "beam4"):
            for name in ("seed1", "student-base", "student-tiny", "student-tiny\\+shortlist"):
                row = rf"\| real {name} \| {engine} \| {mode} \| {NUMBER} \| {NUMBER}–{NUMBER} \| .*"
                assert lines_like(row, out)
            assert lines_like(rf"\| {engine} \| {mode} \| {NUMBER}× \| {NUMBER}× \| {NUMBER}× \|", out)
    assert ("| engine | mode | student-base ÷ seed1 | student-tiny ÷ seed1 | student-tiny+shortlist ÷ seed1 |" in out
            and "synthetic" not in out)

    # distill-mixed in the same OUT: the teachers and their translations of the training sources are reused, the
    # monolingual sources translated; each student reads the human pairs, then both translations
    mono, built = build_on_data / "tatoeba" / "dev.zh", tmp_path / "build-on"
    kept = [*built.glob("seed*/checkpoints/*.pt"), *built.glob("distilled/*")]
    made = {path: path.stat().st_mtime_ns for path in kept}
    out = run("bench_build_on.sh", "distill-mixed", str(mono), tmp_path=tmp_path, env=env)
    assert {path: path.stat().st_mtime_ns for path in made} == made
    assert len((built / "distilled-mono" / "train.en").read_text(encoding="utf-8").splitlines()) \
        == len(mono.read_text(encoding="utf-8").splitlines())
    for student in ("base", "tiny"):
        config_yaml = (built / f"student-{student}-mixed" / "config.yaml").read_text(encoding="utf-8")
        assert all(f"{corpus}/train" in config_yaml for corpus in ("tatoeba", "distilled", "distilled-mono"))
    for name in ("teacher: ensemble of seeds 1, 2, 3", "seed 1: the students' recipe on the human pairs",
                 *(f"student-{s} on the human and the teacher's pairs" for s in ("base", "tiny"))):
        for split in ("test", "dev"):
            assert f"== {name}, tatoeba {split}, beam 5" in out
    assert len(bleu_lines(out)) == 8

    # distill-member in the same OUT: seed 1, the first teacher, goes on from its weights on the teacher's pairs and,
    # to compare, on the human ones
    out = run("bench_build_on.sh", "distill-member", tmp_path=tmp_path, env=env)
    assert {path: path.stat().st_mtime_ns for path in made} == made

    def train_path(run):
        return yaml.safe_load((built / run / "config.yaml").read_text(encoding="utf-8"))["data"]["train"]["path"]

    for arm, corpus in (("distilled", f"{built}/distilled/train"), ("human", train_path("seed1"))):
        last = load_checkpoint(built / f"member-{arm}" / "checkpoints" / "last.pt")
        assert last.position.step == 4 and last.init_from["checkpoint"] == str(first_teacher.resolve())
        assert train_path(f"member-{arm}") == corpus
    for name in ("teacher: ensemble of seeds 1, 2, 3", "the teacher's first model",
                 "the first model, on with the teacher's pairs", "the first model, on with the human pairs"):
        for split in ("test", "dev"):
            assert f"== {name}, tatoeba {split}, beam 5" in out
    assert len(bleu_lines(out)) == 8

    # TEACHER in an OUT of its own: seed 2 alone teaches, and seed 1, the baseline, is trained there; with MONO the
    # students read the teacher's translations of it too, and its Tatoeba pairs twice an epoch
    teacher, taught = built / "seed2" / "checkpoints" / "best.pt", tmp_path / "taught"
    out = run("bench_build_on.sh", "distill", str(mono), tmp_path=tmp_path,
              env={**env, "OUT": str(taught), "TEACHER": str(teacher), "ENGINES": "mt"})
    for distilled in ("distilled", "distilled-mono"):
        assert str(teacher.resolve()) in (taught / distilled / "distill.json").read_text(encoding="utf-8")
    assert not (taught / "seed2").exists() and (taught / "seed1" / "checkpoints").is_dir()
    for student in ("base", "tiny"):
        config_yaml = yaml.safe_load((taught / f"student-mono-{student}" / "config.yaml").read_text(encoding="utf-8"))
        assert config_yaml["data"]["train"]["repeat"] == 2
        assert [corpus["path"] for corpus in config_yaml["data"]["extra_train"]] == [f"{taught}/distilled-mono/train"]
    assert f"== teacher: {teacher}, tatoeba, beam 5" in out and len(bleu_lines(out)) == 5
    assert lines_like(rf"\| mt \| beam4 \| {NUMBER}× \| {NUMBER}× \| {NUMBER}× \|", out)
    # a record a part (the teacher's time in it), and bench_decode.py's of the speed
    entries = recorded(tmp_path, "bench_build_on", command="OUT=")
    parts = ["distill", f"distill-mixed {mono}", "distill-member", f"distill {mono}"]
    assert [entry["title"].split(",")[0] for entry in entries] == [f"building on models: {part}" for part in parts]
    assert entries[0]["figures"][0]["student-tiny, tatoeba: BLEU"] >= 0
    assert entries[-1]["figures"][0]["the teacher's translation into distilled-mono: seconds"] >= 0
    assert len(recorded(tmp_path, "bench_decode")) == 2


def test_bench_build_on_backtranslate(config, build_on_data, corpus_dir, tmp_path):
    """The reverse model, the English side turned into tagged synthetic pairs twice (sampling, beam), a model on
    each mixture, and six scores. (As in the distill part: models of 4 updates say something only if made to.)"""
    out = run("bench_build_on.sh", "backtranslate", str(corpus_dir / "dev.en"), tmp_path=tmp_path,
              env={"OUT": str(tmp_path / "build-on"), "CONFIG": str(config), "STEPS": "4", "DATA": str(build_on_data),
                   "DISTILL": "--min-len 3", "SET": "data.filters=[]"})
    english = (corpus_dir / "dev.en").read_text(encoding="utf-8").splitlines()
    for mode in ("sampling", "beam"):
        made = tmp_path / "build-on" / f"bt-{mode}"
        assert (made / "train.en").read_text(encoding="utf-8").splitlines() == [line for line in english if line]
        assert len((made / "train.zh").read_text(encoding="utf-8").splitlines()) == len(english)
        config_yaml = (tmp_path / "build-on" / f"zh-en-bt-{mode}" / "config.yaml").read_text(encoding="utf-8")
        assert "<BT>" in config_yaml and "synthetic: true" in config_yaml
    for name in ("seed 1, Tatoeba alone", "back-translated by sampling", "back-translated by beam 4"):
        for split in ("test", "dev"):
            assert f"== {name}, tatoeba {split}, beam 5" in out
    assert len(bleu_lines(out)) == 6
    [entry] = recorded(tmp_path, "bench_build_on", command="OUT=")
    assert entry["figures"][0]["back-translated by beam 4, tatoeba test: BLEU"] >= 0


def test_gpu_scripts_parse():
    """They need a GPU machine; here only their syntax."""
    for script in ("gpu_bench.sh", "gpu_data.sh"):
        subprocess.run(["bash", "-n", str(SCRIPTS / script)], check=True)


# --- speed ------------------------------------------------------------------------------------------------------

def test_bench_train(config, tmp_path):
    """The --config workload (mt's pipeline on a corpus). The default one, the peers' fixed model and 4,000-token
    batches, takes 3 s an update on one thread: it runs the same run() and print."""
    out = run("bench_train.py", "--config", str(config), "--steps", "2", "--warmup", "1", tmp_path=tmp_path)
    assert lines_like(rf"mt tiny on cpu \(\w+\): {NUMBER} target tok/s, .*peak memory {NUMBER} MB "
                      rf"\(2 timed updates after 1\); {NUMBER}% of the process's CPU time in the kernel "
                      rf"\(page faults: {NUMBER} an update\)", out)
    [entry] = recorded(tmp_path, "bench_train")
    assert entry["figures"][0]["timed updates"] == 2 and entry["figures"][0]["target tokens/s"] > 0


def test_avx2_caps(config, tmp_path):
    """scripts/avx2.sh imitates an AVX2-only CPU on any x86 one: torch's kernels run at AVX2, and precision auto,
    bf16 on a CPU with native bf16, trains in fp32."""
    assert run("avx2.sh", sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())",
               tmp_path=tmp_path).split() == ["AVX2"]
    out = run("avx2.sh", sys.executable, str(SCRIPTS / "bench_train.py"), "--config", str(config),
              "--set", "train.precision=auto", "--steps", "1", "--warmup", "1", tmp_path=tmp_path)
    assert lines_like(r"mt tiny on cpu \(float32\): .*", out)


def test_bench_decode(tmp_path):
    """The peers' synthetic workload, 8 of its sentences, each engine in its own process (without --peers). The
    real workload (--checkpoint) runs three more such processes."""
    if not (PEERS / "common.py").exists():
        pytest.skip(f"needs the peers harness's common.py in {PEERS}")
    out = run("bench_decode.py", "--repeats", "1", "--synthetic-sentences", "8", tmp_path=tmp_path)
    assert "| workload | engine | mode | sentences/s | range | output tokens/s | peak RSS MB |" in out
    bf16 = ["mt bfloat16"] if has_native_bf16(torch.device("cpu")) else []  # timed where the CPU has bf16 products
    engines = ("mt", *bf16, "ctranslate2 float32", "ctranslate2 int8")
    for engine in engines:
        for mode in ("greedy", "beam4"):
            assert lines_like(rf"\| synthetic \| {engine} \| {mode} \| {NUMBER} \| {NUMBER}–{NUMBER} \| .*", out)
    [entry] = recorded(tmp_path, "bench_decode")
    assert {(row["engine"], row["mode"]) for row in entry["figures"]} == {
        (engine, mode) for engine in engines for mode in ("greedy", "beam4")}


def test_bench_serve(checkpoint, tmp_path):
    out = run("bench_serve.py", "--checkpoint", str(checkpoint), "--sentences", "20", "--clients", "1", "4",
              "--seconds", "0.2", "--correctness", "20", "--real-text", "3", tmp_path=tmp_path)
    assert "| batching | clients | requests | req/s | p50 ms | p99 ms | errors | wrong |" in out
    assert len(lines_like(r"\| (continuous|rounds|off) \| [14] \| .*", out)) == 6
    for batching in ("continuous", "rounds"):
        assert lines_like(rf"4 clients: {batching} {NUMBER}× one at a time, {NUMBER}× offline", out)
        for request in ("1 sentence", "paragraph of 5 sentences", "1 sentence while another client's paragraphs"):
            assert lines_like(rf"\| {batching} \| {request}.* \| {NUMBER} \| {NUMBER} \| {NUMBER} \|", out)
        assert lines_like(rf"{batching}: paragraph of 5 sentences ÷ 1 sentence: {NUMBER}× \(mean latency\)", out)
    # (how many differ is not checked: an untrained model's near-ties may fall either way in another batch)
    assert lines_like(r"correctness: 20 requests at 32 clients, 0 lost, 0 errors, \d+ differ from the offline .*", out)
    assert lines_like(rf"server memory: peak {NUMBER} MB; .*", out)
    assert lines_like(rf"\| rounds \| 1 sentence from the cache \| {NUMBER} \| {NUMBER} \| {NUMBER} \|", out)
    assert lines_like(r"cache: \d+ hits, \d+ misses", out)
    [entry] = recorded(tmp_path, "bench_serve")
    assert {row["run"] for row in entry["figures"]} == {"offline", "load", "correctness", "real text, 1 client"}
    assert all(row["req/s"] > 0 for row in entry["figures"] if row["run"] == "load")


def test_soak_serve(checkpoint, tmp_path):
    plot = tmp_path / "soak.png"
    out = run("soak_serve.py", "--checkpoint", str(checkpoint), "--requests", "40", "--clients", "4",
              "--interval", "0.1", "--plot", str(plot), tmp_path=tmp_path)
    assert lines_like(rf"40 requests \(0 errors\) from 4 clients in {NUMBER} s .*", out)
    assert lines_like(rf"RSS MB: start {NUMBER}, after warm-up \(10% of requests\) {NUMBER}, end .*", out)
    assert plot.stat().st_size and plot.with_suffix(".csv").read_text().startswith("seconds,requests_done,rss_mb")
    [entry] = recorded(tmp_path, "soak_serve")
    assert entry["figures"][0]["requests"] == 40 and entry["figures"][0]["RSS MB max"] > 0
    assert [row["tenth of the requests"] for row in entry["figures"][1:]] == list(range(1, 11))


def test_chaos_serve(checkpoint, tmp_path):
    """Requests, suggestions and abuse while the server is stopped by SIGTERM and SIGKILL in turn: every answer
    right (continuous batching: exactly the offline translation), none lost but those that reach the server in the
    instant a SIGTERM stop closes its listener (docs/serving.md#stopping), every answered suggestion kept."""
    out = run("chaos_serve.py", "--checkpoint", str(checkpoint), "--requests", "80", "--clients", "4",
              "--stop-every", "20", "--batching", "continuous", tmp_path=tmp_path)
    assert lines_like(r"translations: 64", out) and lines_like(r"suggestions: 8", out)
    [entry] = recorded(tmp_path, "chaos_serve")
    [row] = entry["figures"]
    assert row["SIGTERM stops"] >= 1 and row["SIGKILL stops"] >= 1 and row["SIGTERM stops not exiting 0"] == 0
    assert row["wrong answers"] == row["5xx answers"] == row["abuse answered otherwise"] == 0
    assert row["lost: cut off, no stop under way"] == 0
    assert row["translations answered"] >= 64 - row["lost: cut off by SIGTERM"]
    assert row["suggestions answered"] > 0 and row["answered suggestions missing"] == 0


def test_bench_huggingface(checkpoint, tmp_path):
    pytest.importorskip("transformers")
    out = run("bench_huggingface.py", "--checkpoint", str(checkpoint), "--sentences", "8", tmp_path=tmp_path)
    assert "| search | mt sentences/s | transformers sentences/s | outputs that differ |" in out
    assert lines_like(rf"\| greedy \| {NUMBER} \| {NUMBER} \| \d+ of 8 \|", out)
    assert lines_like(r"\| greedy, mt's output limit lifted .* \| \d+ of 8 \|", out)
    [entry] = recorded(tmp_path, "bench_huggingface")
    assert len(entry["figures"]) == 4 and entry["figures"][0]["mt sentences/s"] > 0
    assert all(0 <= row["outputs that differ"] <= 8 for row in entry["figures"])


def test_bench_script_conversion(checkpoint, tmp_path):
    pytest.importorskip("transformers")
    out = run("bench_script_conversion.py", "--checkpoint", str(checkpoint), "--lines", "6", "--speed-lines", "200",
              tmp_path=tmp_path)
    assert lines_like(r"source pieces equal to mt's, huggingface source\.spm: \d+/12", out)
    assert len(lines_like(rf"transformers greedy equal to mt translate, .*: \d+/12 .*BLEU {NUMBER}", out)) == 2
    assert lines_like(rf"tokenising 200 lines: .* {NUMBER} lines/s .*", out)
    [entry] = recorded(tmp_path, "bench_script_conversion")
    assert [row["of"] for row in entry["figures"] if "of" in row] == [12] * 4
    assert entry["figures"][-1]["lines/s"] > 0 and entry["figures"][-1]["×"] > 0


def test_bench_import(tmp_path):
    pytest.importorskip("transformers")
    out = run("bench_import.py", "--shape", "small", "--sentences", "6", "--max-tokens", "4", tmp_path=tmp_path)
    assert lines_like(rf"mt import: {NUMBER} s, peak memory {NUMBER} MB", out)
    assert lines_like(rf"\| greedy \| {NUMBER} \| {NUMBER} \| {NUMBER} \| \d of 6 \|", out)
    assert lines_like(rf"\| beam 4 \| {NUMBER} \| {NUMBER} \| {NUMBER} \|  \|", out)
    [entry] = recorded(tmp_path, "bench_import")
    assert [row["step"] for row in entry["figures"]] == ["mt import", "load and translate one sentence (new process)",
                                                         "translate", "translate"]
    assert entry["figures"][0]["peak memory MB"] > 0 and entry["figures"][2]["mt sentences/s"] > 0


def test_bench_sampling(config, tmp_path):
    out = run("bench_sampling.py", "-c", str(config), "--epochs", "1", tmp_path=tmp_path)
    assert lines_like(rf"once-only preparation: {NUMBER} s for 285 training pairs per epoch .*", out)
    assert lines_like(rf"epoch 0, sampled segmentation \(alpha 0\.1\): {NUMBER} s, .*", out)
    [entry] = recorded(tmp_path, "bench_sampling")
    assert [row["step"] for row in entry["figures"]] == ["once-only preparation", "epoch 0, sampled segmentation",
                                                         "the whole run"]
    assert entry["figures"][0]["pairs"] == 285 and entry["figures"][2]["peak memory MB"] > 0


# --- text, cleaning, robustness ---------------------------------------------------------------------------------

def test_bench_real_text(checkpoint, corpus_dir, tmp_path):
    out = run("bench_real_text.py", "--checkpoint", str(checkpoint), "--data", str(corpus_dir),
              "--numbers", str(corpus_dir / "train.zh"), tmp_path=tmp_path)
    for heading in ("## 1. Paragraphs", "## 2. HTML", "## 3. Tag placement", "## 4. Speed", "## 5. Documents"):
        assert heading in out
    assert lines_like(rf"translate_marked \(tags\): +{NUMBER} sent/s .*", out)
    assert lines_like(rf"text outside tags = plain translation: +\d+/\d+ \({NUMBER}%\) .*", out)
    assert lines_like(rf"all text, <code> contents included: +\d+/\d+ \({NUMBER}%\); mismatches \d+, .*", out)
    assert lines_like(rf"output sentences = reference sentences, \(a\): \d+/\d+ \({NUMBER}%\)", out)
    train = (corpus_dir / "train.zh").read_text(encoding="utf-8").splitlines()
    from_train = sum(bool(re.search("[0-9]", line)) for line in train)
    assert lines_like(rf"## 3\. Tag placement: .* \(\d+, {from_train} of them from --numbers\); goal .*", out)
    [entry] = recorded(tmp_path, "bench_real_text")
    rows = {(row["item"], row["measure"]): row for row in entry["figures"]}
    assert {item for item, _ in rows} == {"1. paragraphs", "2. HTML", "3. tag placement", "4. speed", "5. documents",
                                          "the run"}
    assert rows["1. paragraphs", "(a) whole, split on"]["BLEU"] >= 0
    assert rows["2. HTML", "well-formed (ElementTree)"]["of"] > 0


def test_bench_glossary(checkpoint, corpus_dir, tmp_path):
    """Both glossaries built from 20 Tatoeba test pairs, each searched with and without, and a glossary that matches
    no sentence, whose outputs are those without one."""
    out = run("bench_glossary.py", "--checkpoint", str(checkpoint), "--set", "tatoeba", str(corpus_dir / "test.zh"),
              str(corpus_dir / "test.en"), "--limit", "20", "--repeats", "1", "--out", str(tmp_path / "out"),
              tmp_path=tmp_path)
    for glossary in ("reference", "forced"):
        assert lines_like(rf"{glossary} terms: \d+ entries \(.*\), e\.g\. .*; \d+ sentences with terms "
                          rf"\(\d+ with 1–2, \d+ with 3\+\), \d+ without", out)
    length_limit = r"term outputs at the length limit \d+"
    assert len(lines_like(rf"  none, beam 4: terms used \d+/\d+ \(.*\); .*; {length_limit}", out)) == 2
    assert len(lines_like(rf"  hard, beam 4: terms used \d+/\d+ \(.*\), .* of those missed without; "
                          rf"duplicated \d+, glued \d+; {length_limit}", out)) == 2
    assert len(lines_like(rf"  hard, beam 4: BLEU {NUMBER} \([+-]{NUMBER}\), chrF {NUMBER} on the term sentences; "
                          r"no-term sentences identical \d+/\d+", out)) == 2
    assert len(lines_like(rf"  speed, beam 4: 1–2-term {NUMBER} → {NUMBER} sentences/s "
                          rf"\({NUMBER}× the time\)(; .*)?", out)) == 2
    assert lines_like(r"matching none, beam 4: 20/20 outputs identical to those without a glossary", out)
    # the forced targets are invented words, which the rewritten references hold (capitalised at a sentence's start)
    # and the originals do not
    forced_tsv = (tmp_path / "out" / "tatoeba.forced.tsv").read_text(encoding="utf-8")
    invented = [line.split("\t")[1].lower() for line in forced_tsv.splitlines()]
    rewritten = (tmp_path / "out" / "tatoeba.forced.ref.en").read_text(encoding="utf-8").lower()
    original = (corpus_dir / "test.en").read_text(encoding="utf-8").lower()
    assert invented and all(word in rewritten and word not in original for word in invented)
    [entry] = recorded(tmp_path, "bench_glossary")
    rows = {(row["set"], row["glossary"], row["mode"]): row for row in entry["figures"]}
    assert set(rows) == {("tatoeba", glossary, mode) for glossary in ("reference", "forced")
                         for mode in ("none", "hard")} | {("tatoeba", "matching none", "hard")}
    assert rows["tatoeba", "matching none", "hard"]["no-term sentences identical"] == 20
    assert all(row["engine"] == "mt" and row["beam"] == 4 and row["sentences"] == 20 for row in rows.values())
    forced = rows["tatoeba", "forced", "hard"]
    assert 0 <= forced["terms used"] <= forced["terms"] and forced["1–2-term sentences/s"] > 0
    pieces = forced["term output pieces"], rows["tatoeba", "forced", "none"]["term output pieces"]
    # the outputs hold the terms' pieces (the tiny model's outputs without them may be empty: no ratio then)
    expected = round(pieces[0] / pieces[1], 2) if pieces[1] else None
    assert pieces[0] > 0 and forced["term output pieces × none"] == expected


def test_bench_glossary_soft_mode(checkpoint, corpus_dir, tmp_path):
    """Soft mode's rows, and the refusal of hard mode with CTranslate2."""
    common = ["--checkpoint", str(checkpoint), "--set", "tatoeba", str(corpus_dir / "test.zh"),
              str(corpus_dir / "test.en"), "--limit", "12", "--repeats", "1", "--out", str(tmp_path / "out")]
    out = run("bench_glossary.py", *common, "--mode", "soft", tmp_path=tmp_path)
    assert len(lines_like(r"  soft, beam 4: terms used \d+/\d+ \(.*\), .* of those missed without; .*", out)) == 2
    [entry] = recorded(tmp_path, "bench_glossary")
    assert {row["mode"] for row in entry["figures"]} == {"none", "soft"}
    refused = subprocess.run([sys.executable, str(SCRIPTS / "bench_glossary.py"), *common, "--engine", "ctranslate2"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "--engine ctranslate2 goes with --mode soft and --export DIR" in refused.stderr


def test_make_noisy_corpus(corpus_dir, tmp_path):
    out = run("make_noisy_corpus.py", "--data", str(corpus_dir), "--out", str(tmp_path / "noisy"), tmp_path=tmp_path)
    assert lines_like(rf"noisy Tatoeba \(seed 1\) → .*: {NUMBER} pairs", out)
    assert lines_like(r"  duplicate +60  \( 20\.0% of N\)", out)
    manifest = (tmp_path / "noisy" / "manifest.tsv").read_text(encoding="utf-8").splitlines()
    assert len(manifest) - 1 == len((tmp_path / "noisy" / "train.zh").read_text(encoding="utf-8").splitlines())


def test_bench_clean(config, tmp_path):
    """The tvsub part with the tiny recipe layered over the dialogue one: `mt clean` on 300 pairs. The score part
    runs seven translations."""
    out = run("bench_clean.py", "--parts", "tvsub", "--config", str(config), "--runs-dir", str(tmp_path / "runs"),
              "--tvsub-dev", str(tmp_path / "tvsub"), tmp_path=tmp_path)
    assert lines_like(rf"mt clean, TVsub alone: {NUMBER} s wall, peak memory {NUMBER} MB .*; \d+ pairs removed", out)
    assert lines_like(r"  duplicates +\d+", out)
    [entry] = recorded(tmp_path, "bench_clean")
    assert entry["figures"][0]["peak memory MB"] > 0
    assert any(row.get("filter") == "duplicates" and row["pairs removed"] > 0 for row in entry["figures"])


def test_bench_clean_tatoeba(config, corpus_dir, tmp_path):
    """The tatoeba part with the tiny recipe on a noisy corpus built from 300 pairs: four trainings of 20 updates,
    the last filtered by the third's model, each scored; then what `mt clean` removed of each kind."""
    out = run("bench_clean.py", "--parts", "tatoeba", "--config", str(config), "--data", str(corpus_dir),
              "--noisy-dir", str(tmp_path / "noisy"), "--runs-dir", str(tmp_path / "runs"), tmp_path=tmp_path)
    for label in (r"\(a\) clean", r"\(b\) noisy", r"\(c\) noisy, filtered", r"\(d\) \(c\) \+ cross_entropy"):
        # minutes, BLEU, chrF, then the ratios to (a): nan where a model this tiny scores 0 BLEU
        assert lines_like(rf"{label} +\d+/\d+( +{NUMBER}){{3}} +({NUMBER}|nan) +({NUMBER}|nan)", out), label
    assert len(lines_like(r"misaligned +\d+ +[\d.]+%.*", out)) == 2
    assert lines_like(r"misaligned +\d+ +[\d.]+%.* +[\d.]+% +[\d.]+%", out)  # (d)'s cross_entropy column
    [entry] = recorded(tmp_path, "bench_clean")
    runs = [row for row in entry["figures"] if "test BLEU (beam 4)" in row]
    assert len(runs) == 4 and all(row["test chrF (beam 4)"] >= 0 for row in runs)
    assert len([row for row in entry["figures"] if row.get("kind") == "misaligned"]) == 2


def test_bench_filters(config, corpus_dir, tmp_path):
    """Each kind of damage at one share of 300 Tatoeba pairs, cleaned; then the tiny recipe trained three times
    (clean without and with filters, damaged with them), scored on the test set and on the dev set as the second;
    then `mt clean` with the defaults and the nine filters (the tiny recipe's 300 pairs in TVsub's place)."""
    run("bench_filters.py", "--data", str(corpus_dir), "--shares", "0.1", "--config", str(config),
        "--second", str(corpus_dir / "dev"), "--runs-dir", str(tmp_path / "runs"), "--tvsub-dev",
        str(tmp_path / "tvsub"), tmp_path=tmp_path)
    damage, bleu, tvsub = recorded(tmp_path, "bench_filters")
    kinds = {row["kind"]: row for row in damage["figures"]}
    assert {"markup", "mojibake", "near", "truncated", "glued"} <= kinds.keys()
    assert all(0 <= row["handled %"] <= 100 and 0 < row["damaged pairs"] <= 30 for row in damage["figures"][:5])
    assert kinds["markup"]["handled %"] >= 90  # repairs do not need a large corpus to work
    assert [row["run"].split(",")[0] for row in bleu["figures"]] == [
        "clean Tatoeba", "clean Tatoeba", "damaged Tatoeba (5% of each kind)"]
    assert all(row["dev BLEU"] >= 0 and row["pairs kept"] > 0 for row in bleu["figures"])
    defaults, nine = tvsub["figures"]
    assert defaults["pairs"] == nine["pairs"] == 300 and "duplicates 12" in defaults["removed"]
    assert nine["removed"].endswith("duplicates 1") and defaults["seconds"] > 0 and nine["peak memory MB"] > 0


def test_bad_inputs(tmp_path):
    """Its set-up (a tiny training) and one of its cases: each case is an `mt` process of its own."""
    out = run("bad_inputs.py", "--only", "truncated", tmp_path=tmp_path)
    assert out.splitlines()[:2] == ["| bad input | what `mt` prints | exit status |", "|---|---|---:|"]
    assert lines_like(r"\| checkpoint truncated \| `mt: error: cut\.pt: .*` \| 2 \|", out)


def test_fuzz(tmp_path):
    """One example per door; a failure found is saved under tmp_path, not among the suite's cases."""
    from doors import DOORS

    out = run("fuzz.py", "all", "--examples", "1", "--cases", str(tmp_path / "cases"), tmp_path=tmp_path)
    assert "| door | examples | failures | s per 1,000 |" in out
    for door in DOORS:
        assert lines_like(rf"\| {door} \| 1 \| \d+ \| {NUMBER} \|", out)
    [entry] = recorded(tmp_path, "fuzz")
    assert [(row["door"], row["examples"]) for row in entry["figures"]] == [(door, 1) for door in DOORS]
    assert all(row["seconds"] >= 0 and row["failures"] >= 0 for row in entry["figures"])


def test_fuzz_atheris(tmp_path):
    """libFuzzer drives two doors, each in a process of its own, one through the in-process server: every example
    asked for runs, and the coverage it reports is of mt's code, the only code instrumented."""
    out = run("fuzz.py", "config", "http", "--engine", "atheris", "--examples", "20",
              "--cases", str(tmp_path / "cases"), tmp_path=tmp_path)
    for door in ("config", "http"):
        assert lines_like(rf"\| {door} \| 20 \| \d+ \| {NUMBER} \|", out)
        edges = lines_like(rf"{door}: libFuzzer's coverage of mt: (\d+) edges, \d+ features, \d+ inputs kept", out)
        assert edges and int(edges[0]) > 0, out
    [entry] = recorded(tmp_path, "fuzz")
    assert [(row["door"], row["examples"]) for row in entry["figures"]] == [("config", 20), ("http", 20)]
    assert all(row["libFuzzer edges"] > 0 for row in entry["figures"])


# scripts/gen_config_docs.py is run by tests/test_config.py (--check), scripts/gen_benchmarks.py by tests/test_docs.py;
# scripts/setup.sh and test.sh by everyone; scripts/sets.sh and figures.sh by the recipes above.


@pytest.fixture
def dev_60(tmp_path) -> tuple[Path, Path]:
    """60 Tatoeba dev pairs: an estimator is fitted on at least 50."""
    from conftest import TATOEBA

    return tuple(write_lines(tmp_path / f"dev.{lang}", (TATOEBA / f"dev.{lang}").read_text(encoding="utf-8")
                             .splitlines()[:60]) for lang in ("zh", "en"))


def test_bench_confidence(checkpoint, corpus_dir, dev_60, tmp_path):
    """The estimator fitted on 60 dev pairs, and 20 test pairs ranked by it, the untrained score and each signal."""
    out = run("bench_confidence.py", "--checkpoint", str(checkpoint), "--dev", *map(str, dev_60), "--test", "tiny",
              str(corpus_dir / "test.zh"), str(corpus_dir / "test.en"), tmp_path=tmp_path)
    assert lines_like(rf"tiny: 20 sentences; ρ confidence -?{NUMBER}, untrained -?{NUMBER} \([+-]{NUMBER}\); best "
                      rf"signal \w+ -?{NUMBER}; .*; search {NUMBER} s, confidence {NUMBER} s .*", out)
    [entry] = recorded(tmp_path, "bench_confidence")
    [row] = entry["figures"]
    assert row["sentences"] == 20 and -1 <= row["ρ confidence"] <= 1 and row["confidence s"] >= 0


def test_bench_guard(checkpoint, corpus_dir, dev_60, tmp_path):
    """The guard on 20 test pairs, off and on, and the four injected failures scored against the model's own."""
    out = run("bench_guard.py", "--checkpoint", str(checkpoint), "--dev", *map(str, dev_60), "--test", "tiny",
              str(corpus_dir / "test.zh"), str(corpus_dir / "test.en"), tmp_path=tmp_path)
    assert lines_like(r"tiny: sentences 20; failed \(guard off\) \d+; .*; AUROC all [\d.]+; .*", out)
    [entry] = recorded(tmp_path, "bench_guard")
    [row] = entry["figures"]
    assert row["passing unchanged"] == row["passing"]  # the guard changes no translation that passes
    assert 0 <= row["AUROC copy"] <= 1 and 0 <= row["AUROC all"] <= 1


def test_bench_adapt(checkpoint, corpus_dir, tmp_path):
    """10 training pairs suggested unjudged to a copy of the tiny run, adapted, and scored on the corrected, near and
    general sets; the run itself is left alone."""
    run_dir = checkpoint.parent.parent
    before = sorted(p.name for p in run_dir.rglob("*"))
    out = run("bench_adapt.py", "--run", str(run_dir), "--out", str(tmp_path / "adapt"), "--domain",
              str(corpus_dir / "train.zh"), str(corpus_dir / "train.en"), "--near", str(corpus_dir / "test.zh"),
              str(corpus_dir / "test.en"), "--general", str(corpus_dir / "test.zh"), str(corpus_dir / "test.en"),
              "--corrections", "10", "--unjudged", "--max-drop", "100", tmp_path=tmp_path)
    assert lines_like(r"10 of 10 corrections accepted", out)
    assert lines_like(rf"adapted on 10 corrections: dev BLEU {NUMBER} → {NUMBER} \(used\) \(\d+ s\)", out)
    [entry] = recorded(tmp_path, "bench_adapt")
    assert [row["set"] for row in entry["figures"]] == ["corrected", "near", "general"]
    assert (tmp_path / "adapt" / "checkpoints" / "adapted.pt").exists()
    assert sorted(p.name for p in run_dir.rglob("*")) == before


def test_bench_suggest(checkpoint, corpus_dir, dev_60, tmp_path):
    """20 Tatoeba test sentences suggested for five ways, judged, and the accepted ones sent to a server."""
    out = run("bench_suggest.py", "--checkpoint", str(checkpoint), "--dev", *map(str, dev_60), "--set",
              str(corpus_dir / "test.zh"), str(corpus_dir / "test.en"), tmp_path=tmp_path)
    assert lines_like(rf"genuine: 20 suggestions, {NUMBER}% accepted; refused: .*", out)
    assert lines_like(rf"{NUMBER} ms a judgement; (\d+) of the \1 sentences a server accepted a suggestion for "
                      r"answered with it at once", out)
    [entry] = recorded(tmp_path, "bench_suggest")
    assert [row["kind"] for row in entry["figures"]] == ["genuine", "loop", "copy", "other language", "unrelated",
                                                        "accepted by a server, answered with it at once"]
