"""Shared fixtures: a tiny slice of the real Tatoeba corpus, a tokenizer trained on it, tiny configs."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from mt.config import Config, load_config
from mt.data.config import TokenizerConfig
from mt.model.config import ModelConfig
from mt.model.transformer import Transformer
from mt.data.tokenizer import PAD, Tokenizer, train_tokenizer
from mt.train.loop import train

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "zh-en"
TATOEBA = SHARED / "tatoeba"


def pytest_configure(config):
    """A benchmark script run by a test records its figures in a temporary folder, never in the project's results
    file, and times the GEMM rate in its record briefly: the suite writes dozens of records, each of which would
    otherwise hold both cores for a second (a hook, not an import-time line: scripts/fuzz.py imports this module
    outside pytest)."""
    os.environ["MT_RESULTS"] = tempfile.mkdtemp(prefix="mt-results-")
    os.environ["MT_GEMM_SECONDS"] = "0.01"


def require_shared() -> None:
    if not TATOEBA.is_dir():
        pytest.skip(f"needs the shared data in {SHARED}")


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_corpus(out: Path) -> Path:
    """train/dev/test .zh/.en files in `out`: 300 / 20 / 20 real Tatoeba pairs."""
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("dev", 20), ("test", 20)):
        for lang in ("zh", "en"):
            lines = (TATOEBA / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            write_lines(out / f"{split}.{lang}", lines)
    return out


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    require_shared()
    return write_corpus(tmp_path_factory.mktemp("corpus"))


TINY_TOKENIZER = TokenizerConfig(vocab_size=600, byte_fallback=False)


@pytest.fixture(scope="session")
def tokenizer(corpus_dir) -> Tokenizer:
    zh = (corpus_dir / "train.zh").read_text(encoding="utf-8").splitlines()
    en = (corpus_dir / "train.en").read_text(encoding="utf-8").splitlines()
    return train_tokenizer(zh, en, TINY_TOKENIZER)


def tiny_yaml(corpus_dir: Path, run_dir: Path, **train) -> str:
    """A config file's text for a model small enough to train in seconds."""
    settings = {"max_steps": 20, "max_tokens": 300, "warmup_steps": 10, "lr_scale": 2.0, "log_every": 5,
                "eval_every": 10, "keep_last": 2, "seed": 1, **train}
    lines = "\n".join(f"  {k}: {v}" for k, v in settings.items())
    return f"""model: {{d_model: 32, num_heads: 2, d_ff: 64, num_encoder_layers: 1, num_decoder_layers: 1, dropout: 0.1}}
tokenizer: {{vocab_size: 600, byte_fallback: false}}
data:
  train: {{path: {corpus_dir / 'train'}}}
  dev: {{path: {corpus_dir / 'dev'}}}
  test: {{path: {corpus_dir / 'test'}}}
  max_len: 32
decode: {{max_len_a: 1.0, max_len_b: 5}}
train:
  run_dir: {run_dir}
{lines}
"""


def tiny_config(corpus_dir: Path, run_dir: Path, tmp_path: Path, **train) -> Config:
    path = tmp_path / "tiny.yaml"
    path.write_text(tiny_yaml(corpus_dir, run_dir, **train), encoding="utf-8")
    return load_config([path])


def tiny_model(vocab: int = 50, norm: str = "post", tgt_vocab: int | None = None, dropout: float = 0.0,
               **shape) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(**{"d_model": 16, "num_heads": 2, "d_ff": 32, "num_encoder_layers": 2,
                            "num_decoder_layers": 2, "dropout": dropout, "norm": norm, "max_positions": 64, **shape})
    return Transformer(config, vocab, tgt_vocab or vocab, PAD).eval()


@pytest.fixture(scope="session")
def trained_runs(corpus_dir, tmp_path_factory):
    """Run A: 8 steps straight. Run B: 4 steps, stop, then --resume to 8. Same config otherwise."""
    root = tmp_path_factory.mktemp("runs")
    straight = train(tiny_config(corpus_dir, root / "a", root, max_steps=8, eval_every=4))
    train(tiny_config(corpus_dir, root / "b", root, max_steps=4, eval_every=4))
    resumed = train(tiny_config(corpus_dir, root / "b", root, max_steps=8, eval_every=4), resume=True)
    return straight, resumed


@contextmanager
def running(app):
    """The app served by uvicorn on a free loopback port, in a thread of this process. uvicorn's records go to the
    root logger (no log_config of its own), where caplog sees them."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
