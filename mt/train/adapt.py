"""`mt adapt`: a trained model fine-tuned on the corrections its server accepted (`mt serve --suggestions`), with the
run's own training pairs replayed beside them so that it keeps what it knew, behind a gate: the adapted model is
used only where its dev-set BLEU is at most `max_drop` under the model it started from.

The adaptation is a run of its own, RUN/adapted/N/ (its log and checkpoints), beside N.tsv (the corrections) and
N.yaml (its config: the run's, with the corrections as an extra training corpus and a fine-tuning schedule).
Where the gate passes, its best checkpoint is copied to RUN/checkpoints/adapted.pt (the one a previous adaptation
left there is replaced); where it fails, the adaptation stays in its own directory and nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from mt.config import Config, load_config, save_config
from mt.core.atomic import CHECKPOINT, TEXT, atomic_write_bytes, check_replaceable
from mt.core.errors import MtError
from mt.data.config import CorpusConfig

REPEAT = 20  # each correction this many times an epoch: a few hundred pairs among the run's thousands
# A short fine-tuning at configs/finetune-cpu.yaml's rate: a low peak (0.05 · d_model^-0.5 · 50^-0.5) moves the
# weights without wiping out what they know; one validation at the end, whose checkpoint is the adapted model.
SCHEDULE = {"max_steps": 300, "max_minutes": 0.0, "warmup_steps": 50, "lr_scale": 0.05, "decay": "linear",
            "eval_every": 300, "keep_last": 0}


@dataclass(frozen=True)
class Adapted:
    """An adaptation's run directory, its dev-set BLEU and the starting model's, and whether the gate passed."""

    run_dir: Path
    corrections: int
    before: float
    after: float
    max_drop: float

    @property
    def passed(self) -> bool:
        return self.after >= self.before - self.max_drop

    def __str__(self) -> str:
        verdict = "used" if self.passed else f"kept aside in {self.run_dir}: more than {self.max_drop:g} lost"
        return (f"adapted on {self.corrections:,} corrections: dev BLEU {self.before:.2f} → {self.after:.2f} "
                f"({verdict})")


def adapt(run_dir: Path, pairs: dict[str, str], max_drop: float, sets: list[str]) -> Adapted:
    """Fine-tune RUN's best checkpoint on the corrections (source → translation) and the run's training pairs;
    gate it on the dev set. `sets`: --set overrides of the adaptation's config (its schedule, its device)."""
    from mt.decode.translator import load_translator
    from mt.train.loop import train

    best, adapted = run_dir / "checkpoints" / "best.pt", run_dir / "checkpoints" / "adapted.pt"
    if not best.is_file():
        raise MtError(f"{run_dir}: no checkpoints/best.pt to adapt (is it a run directory?)")
    check_replaceable(adapted, CHECKPOINT)
    original = load_translator(best)
    out = _new_run(run_dir / "adapted")
    config = load_config([_write_config(out, original.config, pairs)], sets, str(out))
    before = _dev_bleu(original, config)
    train(config, init_from=best)
    result = Adapted(out, len(pairs), before, _dev_bleu(load_translator(out / "checkpoints" / "best.pt"), config),
                     max_drop)
    if result.passed:
        atomic_write_bytes(adapted, (out / "checkpoints" / "best.pt").read_bytes(), CHECKPOINT)
    return result


def _new_run(parent: Path) -> Path:
    """parent/N for the first N after those taken (N, N.tsv or N.yaml)."""
    parent.mkdir(parents=True, exist_ok=True)
    number = 1 + max((int(p.name.split(".")[0]) for p in parent.iterdir() if p.name.split(".")[0].isdigit()),
                     default=0)
    return parent / str(number)


def _write_config(out: Path, config: Config, pairs: dict[str, str]) -> Path:
    """The adaptation's corrections (OUT.tsv) and config (OUT.yaml): the run's, the corrections added to its
    training corpora."""
    lines = "".join(f"{' '.join(s.split())}\t{' '.join(t.split())}\n" for s, t in pairs.items())
    corrections_file = out.with_name(f"{out.name}.tsv")
    atomic_write_bytes(corrections_file, lines.encode("utf-8"), TEXT)
    corrections = CorpusConfig(path=str(corrections_file), repeat=REPEAT, filters=[])
    adapting = replace(config, data=replace(config.data, extra_train=[*config.data.extra_train, corrections]),
                       train=replace(config.train, **SCHEDULE))
    path = out.with_name(f"{out.name}.yaml")
    save_config(adapting, path)
    return path


def _dev_bleu(translator, config: Config) -> float:
    """BLEU on the config's whole dev set (training validates on data.dev_max_sentences of it, for speed), with the
    config's search."""
    from mt.decode.evaluate import evaluate, read_held_out

    sources, references = read_held_out(config.data, "dev")
    return evaluate(translator, sources, references, config.decode).bleu
