"""A run directory's layout: the name of every file and folder mt keeps in one, said here only.

    runs/NAME/
        config.yaml                     the resolved config (`mt train`, `mt import`)
        spm.model                       the joint SentencePiece model, or spm.src.model and spm.tgt.model
        cache/                          the prepared corpora's token ids (`mt prepare`)
        log.jsonl                       one JSON record per logged step and validation (`mt plot` reads it)
        tensorboard/                    the same for TensorBoard, with train.tensorboard
        lock                            held by the one process that writes the run (mt/core/run_lock.py)
        checkpoints/step-00001000.pt    the newest `train.keep_last` of these
        checkpoints/last.pt             hard link to the newest step checkpoint
        checkpoints/best.pt             hard link to the best by dev BLEU
        checkpoints/average.pt          `mt average`: the mean of the newest N step checkpoints
        clean/                          `mt clean`'s report.md and removed.tsv
        training.png                    `mt plot`'s curves
        ctranslate2/                    where `--engine ctranslate2` looks for the run's export by default
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mt.core.errors import MtError

RUNS_ROOT = Path("runs")  # where runs go by default: runs/<first config file's name>


@dataclass(frozen=True)
class RunDir:
    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))  # a --run-dir or config string as well as a Path

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def joint_tokenizer(self) -> Path:
        return self.path / "spm.model"

    @property
    def side_tokenizers(self) -> tuple[Path, Path]:
        """The source and the target language's own SentencePiece models, when they are not joint."""
        return self.path / "spm.src.model", self.path / "spm.tgt.model"

    @property
    def cache(self) -> Path:
        return self.path / "cache"

    @property
    def log(self) -> Path:
        return self.path / "log.jsonl"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    @property
    def lock(self) -> Path:
        return self.path / "lock"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def step(self, step: int) -> Path:
        return self.checkpoints / f"step-{step:08d}.pt"

    def steps(self) -> list[Path]:
        """The step checkpoints there are, oldest first."""
        return sorted(self.checkpoints.glob("step-*.pt"))

    @property
    def last(self) -> Path:
        return self.checkpoints / "last.pt"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best.pt"

    @property
    def average(self) -> Path:
        return self.checkpoints / "average.pt"

    @property
    def clean(self) -> Path:
        return self.path / "clean"

    @property
    def plot(self) -> Path:
        return self.path / "training.png"

    @property
    def ctranslate2(self) -> Path:
        return self.path / "ctranslate2"

    def is_run(self) -> bool:
        """Whether mt has written here: a non-empty directory with none of these is somebody else's (its
        config.yaml may be the user's own config, which a run's would replace)."""
        return any(path.exists() for path in (self.lock, self.joint_tokenizer, self.side_tokenizers[0],
                                              self.checkpoints, self.cache, self.log))


def latest_run() -> RunDir:
    """The run under runs/ that trained most recently."""
    lasts = [RunDir(path) for path in RUNS_ROOT.iterdir() if RunDir(path).last.exists()] if RUNS_ROOT.is_dir() else []
    if not lasts:
        raise MtError(f"no trained run under {RUNS_ROOT}/: train one with `mt train` or pass --checkpoint")
    return max(lasts, key=lambda run: run.last.stat().st_mtime)
