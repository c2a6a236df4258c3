"""Pictures of a model: its training curves (`mt plot`) and the cross-attention of one translation
(`mt translate --attention`). Matplotlib with the Agg backend: no display needed.
"""

from __future__ import annotations

import functools
import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ft2font import FT2Font  # noqa: E402

from mt.core.atomic import PNG, atomic_write_bytes  # noqa: E402
from mt.core.errors import MtError  # noqa: E402
from mt.core.run_dir import RunDir  # noqa: E402
from mt.decode.translator import Attention  # noqa: E402

log = logging.getLogger(__name__)


def read_log(run_dir: Path) -> tuple[list[dict], list[dict]]:
    """RUN/log.jsonl as (training records, validation records), one per step: a resumed run logs the steps
    after its last checkpoint twice, and the later record wins."""
    path = RunDir(run_dir).log
    if not path.is_file():
        raise MtError(f"{path}: no training log (is {run_dir} a run directory?)")
    train, dev = {}, {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise MtError(f"{path}:{number}: not a JSON record")
        (dev if "dev_bleu" in record else train)[record["step"]] = record
    return [train[s] for s in sorted(train)], [dev[s] for s in sorted(dev)]


def plot_training(run_dir: Path, output: Path) -> Figure:
    """Four panels against steps: training and dev loss, learning rate, dev BLEU and chrF, tokens/s."""
    train, dev = read_log(run_dir)
    if not train and not dev:
        raise MtError(f"{RunDir(run_dir).log}: no records yet")
    figure, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    loss, lr, scores, speed = axes.flat
    loss.plot(steps(train), values(train, "loss"), label="training (label-smoothed, running mean)")
    loss.plot(steps(dev), values(dev, "dev_loss"), "o-", label="dev (no smoothing)")
    loss.set(title="loss per target token", ylabel="nats")
    lr.plot(steps(train), values(train, "lr"))
    lr.set(title="learning rate")
    scores.plot(steps(dev), values(dev, "dev_bleu"), "o-", label="BLEU")
    scores.plot(steps(dev), values(dev, "dev_chrf"), "s-", label="chrF")
    scores.set(title="dev set, greedy search (sacreBLEU)")
    speed.plot(steps(train), values(train, "tok_s"))
    speed.set(title="training speed", ylabel="target tokens/s (since start)")
    for ax in axes.flat:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    loss.legend()
    scores.legend()
    figure.suptitle(f"training of {Path(run_dir).name}")
    save(figure, output)
    return figure


def steps(records: list[dict]) -> list[int]:
    return [r["step"] for r in records]


def values(records: list[dict], key: str) -> list[float]:
    return [r[key] for r in records]


def draw_attention(attention: Attention, output: Path, layer: int | None = None, head: int | None = None) -> Figure:
    """A translation's cross-attention (Translator.attention); a chosen head alone is of the last layer unless
    `layer` says which. See plot_attention."""
    if head is not None and layer is None:
        layer = attention.weights.size(0)
    return plot_attention(attention.weights, Pieces(attention.source, attention.source_ids),
                          Pieces(attention.target, attention.target_ids), output, layer, head)


def plot_attention(weights, src: Pieces, tgt: Pieces, output: Path, layer: int | None = None,
                   head: int | None = None) -> Figure:
    """Cross-attention of one translation. weights [layers, heads, T, S] (a tensor); src and tgt label its
    columns and rows. One panel per layer with the heads averaged; or one panel for a chosen layer (1-based),
    heads averaged or one chosen head."""
    layers, heads = weights.shape[:2]
    if layer is not None and not 1 <= layer <= layers:
        raise MtError(f"--layer {layer}: the model has decoder layers 1 to {layers}")
    if head is not None and not 1 <= head <= heads:
        raise MtError(f"--head {head}: the model has heads 1 to {heads}")
    chosen = range(layers) if layer is None else [layer - 1]
    figure, axes = plt.subplots(1, len(chosen), figsize=(2 + 0.45 * len(src.ids) * len(chosen),
                                                         1.5 + 0.35 * len(tgt.ids)), squeeze=False)
    for ax, index in zip(axes[0], chosen):
        matrix = weights[index].mean(0) if head is None else weights[index, head - 1]  # [T, S]
        ax.imshow(matrix.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        long = max(len(label) for label in src.labels()) > 3
        ax.set_xticks(range(len(src.ids)), src.labels(), rotation=90 if long else 0, **src.font())
        ax.set_yticks(range(len(tgt.ids)), tgt.labels(), **tgt.font())
        ax.set_title(f"layer {index + 1}")
        ax.set_xlabel("source")
    axes[0][0].set_ylabel("translation")
    figure.suptitle("cross-attention, " + ("heads averaged" if head is None else f"head {head}"))
    figure.tight_layout()
    save(figure, output)
    return figure


@dataclass
class Pieces:
    """A sentence's SentencePiece pieces and their ids, for the labels of an attention map."""

    pieces: list[str]
    ids: list[int]

    def needs_cjk(self) -> bool:
        return any(ord(c) >= 0x2E80 for piece in self.pieces for c in piece)

    def labels(self) -> list[str]:
        """The pieces, or their ids when the pieces need a CJK font and none is installed."""
        if self.needs_cjk() and cjk_font() is None:
            return [str(i) for i in self.ids]
        return self.pieces

    def font(self) -> dict:
        return {"fontfamily": cjk_font()} if self.needs_cjk() and cjk_font() else {}


@functools.cache  # the font search reads every installed font: once per process
def cjk_font() -> str | None:
    """The name of an installed font that has Chinese characters (e.g. Noto Sans CJK, WenQuanYi), or None
    with a warning."""
    for entry in font_manager.fontManager.ttflist:
        if entry.name.startswith("Last Resort"):  # matplotlib's placeholder font: a box for every character
            continue
        try:
            charmap = FT2Font(entry.fname).get_charmap()
        except (OSError, RuntimeError):
            continue
        if all(ord(c) in charmap for c in "中文爱"):
            return entry.name
    log.warning("no installed font has Chinese characters (install e.g. fonts-noto-cjk); "
                "Chinese pieces are labelled by their ids")
    return None


def save(figure: Figure, output: Path) -> None:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    atomic_write_bytes(Path(output), buffer.getvalue(), PNG)
