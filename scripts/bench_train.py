"""Training speed of mt: target tokens/s, padding, peak memory and model-FLOPs utilisation (MFU).

1. --peers (the default): the workload of ../shared/bench/peers, from its common.py: its model (d_model 256,
   4 heads, d_ff 1024, 3+3 layers, shared vocabulary 8,000, dropout 0.1, label smoothing 0.1), its synthetic
   batches of at most 4,000 padded tokens, 5 warm-up then BENCH_STEPS timed updates, 2 threads, fp32 (or
   --precision bf16 / auto, mt's default: bf16 on a CPU with native bf16). Timed
   around mt's own `Trainer.train_step` (forward, backward, Adam) on pre-built batches, as the harness times its
   in-process peers. The result also goes into the harness's results file (BENCH_RESULTS).
2. --config CONFIG: a real config and corpus through mt's whole pipeline (batches built by its DataLoader),
   e.g. the base model in bf16 on a GPU:

       python scripts/bench_train.py --config configs/base.yaml --set data.train.path=... --steps 50

MFU = 6 × matmul weights a token passes through × its tokens ÷ time ÷ peak rate, with the peak measured here as
a large matrix product in the training precision (2048³ fp32 on CPU, as the harness's gemm.py; 8192³ on GPU).
It also prints the share of the process's CPU time spent in the kernel, most of it page faults: memory a step
writes for the first time, which the kernel maps and zero-fills (docs/benchmarks.md, "Training speed").
Run --peers right before or after `PEERS="torchref hf" bash ../shared/bench/peers/run_all.sh` on an idle machine.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import get_args

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PEERS = ROOT.parent / "shared" / "bench" / "peers"

from mt.data.batching import make_batch  # noqa: E402
from mt.config import Config, Precision, TrainConfig, load_config  # noqa: E402
from mt.core.device import resolve_device  # noqa: E402
from mt.core.memory import use_huge_pages  # noqa: E402
from mt.model.config import ModelConfig  # noqa: E402
from mt.model.transformer import Transformer  # noqa: E402
from mt.data.tokenizer import BOS, PAD  # noqa: E402
from mt.train.prepare import prepare_data  # noqa: E402
from mt.train.trainer import Trainer  # noqa: E402
from mt.train.updates import loader, step_batches  # noqa: E402
from records import record  # noqa: E402  (scripts/records.py: the results file)


def matmul_weights(model: Transformer) -> tuple[int, int]:
    """Weights of the matrix products each source token and each target token passes through."""
    def linear(module: nn.Module) -> int:
        return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))
    cross_kv = sum(layer.cross_attn.w_k.weight.numel() + layer.cross_attn.w_v.weight.numel()
                   for layer in model.decoder.layers)  # applied to the memory: once per source token
    return linear(model.encoder) + cross_kv, linear(model.decoder) - cross_kv + linear(model.generator)


def peak_flops(device: torch.device, dtype: torch.dtype) -> float:
    """Measured FLOP/s of one large matrix product, the ceiling MFU is taken against."""
    n = 8192 if device.type == "cuda" else 2048
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    synchronize(device)
    repeats = 10 if device.type == "cuda" else 3
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * n ** 3 * repeats / (time.perf_counter() - start)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peers_workload(steps: int | None, precision: str) -> tuple[Trainer, list, object]:
    sys.path.insert(0, str(PEERS))
    import common as c  # the harness's settings and synthetic data

    c.set_threads()
    torch.manual_seed(c.SEED)
    config = Config(model=ModelConfig(d_model=c.D_MODEL, num_heads=c.HEADS, d_ff=c.D_FF,
                                      num_encoder_layers=c.ENC_LAYERS, num_decoder_layers=c.DEC_LAYERS,
                                      dropout=c.DROPOUT),
                    train=TrainConfig(label_smoothing=c.LABEL_SMOOTHING, precision=precision, tensorboard=False,
                                      run_dir=tempfile.mkdtemp()))
    vocab = SimpleNamespace(src_vocab_size=c.VOCAB, tgt_vocab_size=c.VOCAB)  # ids only: no SentencePiece here
    trainer = Trainer(config, vocab, torch.device("cpu"))
    # The harness's pairs already end in EOS with words at ids ≥ 4; mt's targets start with BOS.
    batches = [[make_batch([s for s, _ in pairs], [[BOS] + t for _, t in pairs])]
               for pairs in c.train_batches(c.WARMUP_STEPS + (steps or c.TIMED_STEPS))]
    return trainer, batches, c


def config_workload(path: str, overrides: list[str], steps: int, warmup: int) -> tuple[Trainer, list]:
    config = load_config([path], overrides, run_dir=tempfile.mkdtemp(prefix="bench-train-"))
    config.train.tensorboard = False
    start = time.perf_counter()
    data = prepare_data(config, Path(config.train.run_dir), None)
    print(f"data prepared in {time.perf_counter() - start:.1f}s; "
          f"{data.train.padding_ratio():.1%} of batch positions are padding")
    trainer = Trainer(config, data.tokenizer, resolve_device(config.train.device))
    updates, epoch = [], 0
    while len(updates) < warmup + steps:  # the loader builds each update's batches, as in `mt train`
        updates += step_batches(data.train, epoch, config.train.accum_steps, trainer.world)
        epoch += 1
    return trainer, loader(data.train, updates[:warmup + steps], config.train.num_workers, trainer.device)


def run(trainer: Trainer, updates, warmup: int) -> dict:
    """Time train_step over the updates after `warmup` untimed ones; count real (non-PAD) tokens."""
    device = trainer.device
    src_weights, tgt_weights = matmul_weights(trainer.model)
    elapsed = src_tokens = tgt_tokens = 0
    for i, batches in enumerate(updates):  # on the CPU: train_step moves them to the device, as in training
        synchronize(device)
        if i == warmup:
            usage = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        trainer.train_step(batches)
        synchronize(device)
        if i >= warmup:
            elapsed += time.perf_counter() - start
            src_tokens += sum(int((b.src != PAD).sum()) for b in batches)
            tgt_tokens += sum(b.num_tokens for b in batches)
    end, timed = resource.getrusage(resource.RUSAGE_SELF), i + 1 - warmup
    kernel, user = end.ru_stime - usage.ru_stime, end.ru_utime - usage.ru_utime
    flops = 6 * (src_weights * src_tokens + tgt_weights * tgt_tokens)
    memory = (torch.cuda.max_memory_allocated() if device.type == "cuda" else end.ru_maxrss * 1024) / 2 ** 20
    peak = peak_flops(device, trainer.dtype or torch.float32)
    return {"tgt_tok_per_s": tgt_tokens / elapsed, "sec_per_step": elapsed / timed,
            "src_tok_per_s": src_tokens / elapsed,
            "model_tflops": flops / elapsed / 1e12, "peak_tflops": peak / 1e12, "mfu": flops / elapsed / peak,
            "peak_memory_mb": memory, "kernel_share": kernel / (kernel + user),
            "page_faults_per_step": (end.ru_minflt - usage.ru_minflt) / timed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="a training config: time it on its own corpus instead of the peers' batches")
    parser.add_argument("--set", action="append", default=[], help="config override KEY=VALUE (repeatable)")
    parser.add_argument("--steps", type=int, default=None, help="timed updates (default: the harness's BENCH_STEPS)")
    parser.add_argument("--precision", default="fp32", choices=get_args(Precision),
                        help="the peers' workload in this train.precision (fp32, as they train; auto: mt's default)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed updates first")
    args = parser.parse_args()
    use_huge_pages()  # as the `mt` command does, before the first large tensor
    if args.config:
        trainer, updates = config_workload(args.config, args.set, args.steps or 50, args.warmup)
        name, c = f"mt {Path(args.config).stem}", None
    else:
        trainer, updates, c = peers_workload(args.steps, args.precision)
        args.warmup, args.steps, name = c.WARMUP_STEPS, len(updates) - c.WARMUP_STEPS, "mt"
    dtype = trainer.dtype_name
    t = trainer.config.train
    compiled = f", compiled ({t.compile_mode}{', length buckets' if t.length_buckets else ''})" if t.compile else ""
    result = run(trainer, updates, args.warmup)
    print(f"{name} on {trainer.device} ({dtype}{compiled}): {result['tgt_tok_per_s']:,.0f} target tok/s, "
          f"{result['src_tok_per_s']:,.0f} source tok/s, {result['model_tflops']:.3g} model TFLOP/s = "
          f"{result['mfu']:.1%} of the measured {result['peak_tflops']:.3g} TFLOP/s matrix-product peak, "
          f"peak memory {result['peak_memory_mb']:,.0f} MB ({args.steps} timed updates after {args.warmup}); "
          f"{result['kernel_share']:.1%} of the process's CPU time in the kernel (page faults: "
          f"{result['page_faults_per_step']:,.0f} an update)")
    workload = "the peers' workload" if c else Path(args.config).name
    record("bench_train.py", f"training speed, {workload}",
           {"workload": workload, "device": str(trainer.device), "precision": dtype,
            "timed updates": args.steps, "target tokens/s": round(result["tgt_tok_per_s"], 1),
            "source tokens/s": round(result["src_tok_per_s"], 1), "MFU %": round(100 * result["mfu"], 1),
            "peak memory MB": round(result["peak_memory_mb"])})
    if c is not None:
        c.record(peer="mt" if dtype == "float32" else f"mt {dtype}", kind="train",
                 method="in-process perf_counter around Trainer.train_step (fwd+bwd+Adam, pre-built batches)",
                 steps=args.steps, tgt_tok_per_s=round(result["tgt_tok_per_s"], 1),
                 src_tok_per_s=round(result["src_tok_per_s"], 1), sec_per_step=round(result["sec_per_step"], 3),
                 model_gflops_per_s=round(1000 * result["model_tflops"], 2),
                 peak_rss_mb=round(result["peak_memory_mb"], 1))


if __name__ == "__main__":
    main()
