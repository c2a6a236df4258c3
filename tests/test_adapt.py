"""`mt adapt`: a run's model fine-tuned on its server's accepted suggestions learns them, is used only where the
dev-set gate passes, and bad input is one clear line."""

from __future__ import annotations

import pytest

from conftest import tiny_config
from mt.cli import run
from mt.decode.translator import load_translator
from mt.serve.suggestions import Judgement, Suggestions
from mt.train import adapt as adapt_module
from mt.train.loop import train

CORRECTIONS = {"我爱你。": "I adore you.", "他是我的朋友。": "He is a friend of mine.", "我们明天去北京。": "We fly to Beijing."}


@pytest.fixture(scope="module")
def run_dir(corpus_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("adapt")
    return train(tiny_config(corpus_dir, root / "run", root, max_steps=30, eval_every=30))


def store_of(path, accepted: dict[str, str], refused: dict[str, str] = {}):
    store = Suggestions(path)
    for source, suggestion in accepted.items():
        store.add(source, suggestion, ("zh", "en"), Judgement(True, "accepted"))
    for source, suggestion in refused.items():
        store.add(source, suggestion, ("zh", "en"), Judgement(False, "it repeats itself"))
    store.close()
    return path


def likelihoods(checkpoint, pairs: dict[str, str]) -> list[float]:
    return [s.mean for s in load_translator(checkpoint, device="cpu").score(list(pairs), list(pairs.values()))]


def test_the_adapted_model_learns_the_accepted_corrections_and_not_the_refused(run_dir, tmp_path, capsys):
    store = store_of(tmp_path / "s.sqlite", CORRECTIONS, {"你好。": "aaaa aaaa"})
    code = run(["adapt", str(run_dir), "--suggestions", str(store), "--max-drop", "100",
                "--set", "train.max_steps=40", "--set", "train.eval_every=40", "--set", "train.lr_scale=1.0"])
    assert code == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("adapted")]
    assert line.startswith("adapted on 3 corrections: dev BLEU") and line.endswith("(used)")
    corrections = (run_dir / "adapted" / "1.tsv").read_text(encoding="utf-8").splitlines()
    assert sorted(corrections) == sorted(f"{s}\t{t}" for s, t in CORRECTIONS.items())
    before = likelihoods(run_dir / "checkpoints" / "best.pt", CORRECTIONS)
    after = likelihoods(run_dir / "checkpoints" / "adapted.pt", CORRECTIONS)
    assert all(a > b + 0.5 for a, b in zip(after, before)), (before, after)


def test_a_failed_gate_keeps_the_adaptation_aside(run_dir, tmp_path, capsys, monkeypatch):
    """A dev BLEU that drops by more than --max-drop: exit 1, and the adapted.pt already there stays as it was."""
    adapted = run_dir / "checkpoints" / "adapted.pt"
    adapted.write_bytes((run_dir / "checkpoints" / "best.pt").read_bytes())
    kept = adapted.read_bytes()
    scores = iter([30.0, 29.0])
    monkeypatch.setattr(adapt_module, "_dev_bleu", lambda translator, config: next(scores))
    code = run(["adapt", str(run_dir), "--suggestions", str(store_of(tmp_path / "s.sqlite", CORRECTIONS)),
                "--max-drop", "0.5", "--set", "train.max_steps=2", "--set", "train.eval_every=2"])
    assert code == 1 and adapted.read_bytes() == kept
    out = capsys.readouterr().out
    assert "dev BLEU 30.00 → 29.00 (kept aside in " in out and "more than 0.5 lost" in out


@pytest.mark.parametrize("problem, message", [
    ("no store", "no such suggestions database"),
    ("nothing accepted", "no accepted suggestions to adapt to"),
    ("no run", "no checkpoints/best.pt to adapt"),
])
def test_bad_input_is_one_line(run_dir, tmp_path, capsys, problem, message):
    store = tmp_path / "s.sqlite"
    if problem != "no store":
        store_of(store, CORRECTIONS if problem == "no run" else {}, {"你好。": "aaaa aaaa"})
    code = run(["adapt", str(tmp_path if problem == "no run" else run_dir), "--suggestions", str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]
