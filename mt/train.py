"""The training loop: prepare data, build the model, then step → log → validate → checkpoint until max_steps.

Teacher forcing: the decoder reads `tgt[:, :-1]` and is scored on `tgt[:, 1:]` with label-smoothed cross
entropy over non-PAD positions. Adam(0.9, 0.98, 1e-9) with the paper's inverse-square-root warm-up.
A run lives in one directory: config.yaml, the SentencePiece model, the token cache, log.jsonl, checkpoints/.
"""

from __future__ import annotations

import dataclasses
import json
import math
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from mt.checkpoint import (checkpoint_dir, link_atomic, load_checkpoint, prune_step_checkpoints,
                           save_checkpoint, tokenizer_state)
from mt.config import Config, config_to_dict, save_config
from mt.batching import make_batch, token_batches
from mt.data import TrainBatches, encode_corpus, filter_pairs, read_corpus
from mt.device import resolve_device
from mt.errors import MtError
from mt.evaluate import score
from mt.model import Transformer
from mt.tokenizer import PAD, Tokenizer, train_tokenizer
from mt.translate import translate_lines


def inverse_sqrt_lr(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The paper's schedule (section 5.3): lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    step = max(step, 1)
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


@dataclass
class Position:
    """Where training stands: updates done, and the next batch of the epoch's fixed batch order."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0
    best_bleu: float = -1.0


@dataclass
class PreparedData:
    tokenizer: Tokenizer
    train: TrainBatches
    dev: datasets.Dataset  # encoded and filtered dev pairs, texts included


def prepare_tokenizer(config: Config, run_dir: Path, train_pairs: datasets.Dataset) -> Tokenizer:
    """The run's tokenizer: the one saved in run_dir, or a new one trained on the training corpus."""
    tokenizer = Tokenizer.load(run_dir)
    if tokenizer is None:
        start = time.perf_counter()
        tokenizer = train_tokenizer(iter(train_pairs["src"]), iter(train_pairs["tgt"]), config.tokenizer)
        tokenizer.save(run_dir)
        kind = "joint" if tokenizer.joint else "separate"
        print(f"tokenizer: trained SentencePiece BPE, {tokenizer.src_vocab_size:,} pieces ({kind}) "
              f"in {time.perf_counter() - start:.1f}s → {run_dir}")
    return tokenizer


def prepare_data(config: Config, run_dir: Path, tokenizer: Tokenizer | None) -> PreparedData:
    data = config.data
    train_pairs = read_corpus(data.train, data, "train")
    dev_pairs = read_corpus(data.dev, data, "dev")
    if data.dev_max_sentences:
        dev_pairs = dev_pairs.select(range(min(data.dev_max_sentences, len(dev_pairs))))
    tokenizer = tokenizer or prepare_tokenizer(config, run_dir, train_pairs)
    cache = run_dir / "cache"
    train_encoded, report = filter_pairs(encode_corpus(train_pairs, tokenizer, cache, "train"), data.max_len, "train")
    print(report)
    dev_encoded, report = filter_pairs(encode_corpus(dev_pairs, tokenizer, cache, "dev"), data.max_len, "dev")
    print(report)
    return PreparedData(tokenizer, TrainBatches(train_encoded, config.train.max_tokens, config.train.seed),
                        dev_encoded)


class Trainer:
    def __init__(self, config: Config, data: PreparedData, device: torch.device):
        self.config, self.data, self.device = config, data, device
        t = config.train
        tok = data.tokenizer
        self.model = Transformer(config.model, tok.src_vocab_size, tok.tgt_vocab_size, PAD).to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=(t.adam_beta1, t.adam_beta2),
                                          eps=t.adam_eps)
        # LambdaLR counts from 0; update k (1-based) uses the paper's rate at step k.
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: inverse_sqrt_lr(
            s + 1, config.model.d_model, t.warmup_steps, t.lr_scale))
        self.criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=t.label_smoothing, reduction="sum")
        self.position = Position()
        self.run_dir = Path(t.run_dir)

    # ------------------------------------------------------------ one update

    def train_step(self, batch) -> float:
        """Forward, loss per target token, backward, clip, Adam, schedule. Returns the loss."""
        self.model.train()
        logits = self.model(batch.src, batch.tgt_input)                         # [B,T,V]
        loss = self.criterion(logits.flatten(0, 1), batch.tgt_label.flatten()) / batch.num_tokens
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.train.clip_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.train.clip_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    # ------------------------------------------------------------ validation

    @torch.no_grad()
    def validate(self) -> dict:
        """Dev loss and perplexity (teacher forced, no smoothing), and BLEU/chrF of greedy translations."""
        self.model.eval()
        dev = self.data.dev
        total_loss, total_tokens = 0.0, 0
        for indices in token_batches(np.asarray(dev["src_len"]), np.asarray(dev["tgt_len"]),
                                     self.config.train.max_tokens):
            rows = dev[indices.tolist()]
            batch = make_batch(rows["src_ids"], rows["tgt_ids"]).to(self.device)
            logits = self.model(batch.src, batch.tgt_input)
            total_loss += nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_label.flatten(),
                                                      ignore_index=PAD, reduction="sum").item()
            total_tokens += batch.num_tokens
        loss = total_loss / total_tokens
        greedy = dataclasses.replace(self.config.decode, beam_size=1, nbest=1)  # fast, and comparable across runs
        hypotheses = translate_lines(self.model, self.data.tokenizer, dev["src"], greedy, self.device)
        scores = score(hypotheses, [dev["tgt"]], self.config.data.tgt_lang)
        return {"dev_loss": loss, "dev_ppl": math.exp(min(loss, 50.0)), "dev_bleu": scores.bleu,
                "dev_chrf": scores.chrf, "sample": hypotheses[0] if hypotheses else ""}

    # ------------------------------------------------------------ checkpoints

    def state(self) -> dict:
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        p = self.position
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "rng": rng,
                "step": p.step, "epoch": p.epoch, "batch_index": p.batch_index, "best_bleu": p.best_bleu,
                "config": config_to_dict(self.config), "tokenizer": tokenizer_state(self.data.tokenizer)}

    def save(self, dev: dict | None) -> Path:
        """step-N.pt, then last.pt (and best.pt when dev BLEU improved) as hard links to it."""
        directory = checkpoint_dir(self.run_dir)
        path = directory / f"step-{self.position.step:08d}.pt"
        improved = dev is not None and dev["dev_bleu"] > self.position.best_bleu
        if improved:
            self.position.best_bleu = dev["dev_bleu"]
        state = self.state()
        state["dev"] = {k: v for k, v in (dev or {}).items() if k != "sample"}
        save_checkpoint(state, path)
        link_atomic(path, directory / "last.pt")
        if improved:
            link_atomic(path, directory / "best.pt")
        prune_step_checkpoints(self.run_dir, self.config.train.keep_last)
        return path

    def restore(self, state: dict) -> None:
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as e:
            raise MtError(f"--resume: the checkpoint's weights do not fit this config's model "
                          f"({str(e).strip().splitlines()[-1].strip()})")
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"]["torch"])
        if "cuda" in state["rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        self.position = Position(state["step"], state["epoch"], state["batch_index"], state["best_bleu"])

    # ------------------------------------------------------------ the loop

    def fit(self) -> None:
        t, p = self.config.train, self.position
        log = (self.run_dir / "log.jsonl").open("a", encoding="utf-8")
        bar = tqdm(total=t.max_steps, initial=p.step, desc="train", unit="step", dynamic_ncols=True,
                   mininterval=0.5 if sys.stderr.isatty() else 30)  # a log file gets a line every 30 s
        tokens, started, smoothed = 0, time.perf_counter(), None
        try:
            while p.step < t.max_steps:
                batches = self.data.train.epoch(p.epoch)
                while p.batch_index < len(batches) and p.step < t.max_steps:
                    batch = self.data.train.batch(batches[p.batch_index]).to(self.device)
                    loss = self.train_step(batch)
                    p.step, p.batch_index = p.step + 1, p.batch_index + 1
                    tokens += batch.num_tokens
                    smoothed = loss if smoothed is None else 0.98 * smoothed + 0.02 * loss
                    bar.update(1)
                    if p.step % t.log_every == 0:
                        tok_s = tokens / (time.perf_counter() - started)
                        lr = self.scheduler.get_last_lr()[0]
                        bar.set_postfix(loss=f"{smoothed:.3f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:,.0f}")
                        log.write(json.dumps({"step": p.step, "loss": smoothed, "lr": lr, "tok_s": tok_s}) + "\n")
                        log.flush()  # readable while training runs
                    if p.step % t.eval_every == 0 or p.step == t.max_steps:
                        self._evaluate_and_save(bar, log)
                if p.batch_index >= len(batches):
                    p.epoch, p.batch_index = p.epoch + 1, 0
        except KeyboardInterrupt:
            bar.close()
            path = self.save(None)
            raise MtError(f"interrupted at step {p.step}: saved {path}; continue with --resume", exit_code=130)
        finally:
            bar.close()
            log.close()
        elapsed = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"done: {p.step} steps, {tokens / max(elapsed, 1e-9):,.0f} target tokens/s, peak memory "
              f"{peak_mb:,.0f} MB, best dev BLEU {p.best_bleu:.2f}; checkpoints in {checkpoint_dir(self.run_dir)}")

    def _evaluate_and_save(self, bar: tqdm, log) -> None:
        dev = self.validate()
        path = self.save(dev)
        bar.write(f"step {self.position.step}: dev loss {dev['dev_loss']:.3f} ppl {dev['dev_ppl']:.1f} "
                  f"BLEU {dev['dev_bleu']:.2f} chrF {dev['dev_chrf']:.2f} | {dev['sample'][:60]!r} → {path.name}")
        log.write(json.dumps({"step": self.position.step, **dev}, ensure_ascii=False) + "\n")
        log.flush()


def train(config: Config, resume: bool = False) -> Path:
    """`mt train`: the whole chain for one run directory. Returns the run directory."""
    run_dir = Path(config.train.run_dir)
    last = checkpoint_dir(run_dir) / "last.pt"
    if last.exists() and not resume:
        raise MtError(f"{run_dir} already holds a run: pass --resume to continue it, "
                      f"or choose another directory with --run-dir")
    if resume and not last.exists():
        raise MtError(f"--resume: no checkpoint at {last}")
    device = resolve_device(config.train.device)
    checkpoint_dir(run_dir).mkdir(parents=True, exist_ok=True)
    for partial in checkpoint_dir(run_dir).glob(".*.tmp"):  # left by a crash in the middle of a write
        partial.unlink()
    torch.manual_seed(config.train.seed)
    state = load_checkpoint(last) if resume else None
    tokenizer = Tokenizer(state["tokenizer"]["src"], state["tokenizer"]["tgt"]) if state else None
    data = prepare_data(config, run_dir, tokenizer)
    save_config(config, run_dir / "config.yaml")
    trainer = Trainer(config, data, device)
    if state is not None:
        trainer.restore(state)
        print(f"resumed from {last} at step {trainer.position.step}")
    params = sum(p.numel() for p in trainer.model.parameters())
    print(f"model: {params:,} parameters, {config.model.norm}-LN, on {device}; "
          f"{data.train.padding_ratio():.1%} of batch positions are padding")
    trainer.fit()
    return run_dir


def train_tokenizer_only(config: Config) -> Path:
    """`mt tokenizer`: train and save the run's tokenizer without training a model."""
    run_dir = Path(config.train.run_dir)
    if (checkpoint_dir(run_dir) / "last.pt").exists():
        raise MtError(f"{run_dir} already holds a trained run; its tokenizer cannot change")
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in Tokenizer.files(run_dir):
        stale.unlink()
    prepare_tokenizer(config, run_dir, read_corpus(config.data.train, config.data, "train"))
    return run_dir
