"""Validation: the dev set's loss and perplexity (teacher forced, no smoothing), and the BLEU and chrF of its
greedy translations, made by the Translator that `mt translate` and `mt evaluate` use."""

from __future__ import annotations

import math

import datasets
import torch
from torch import nn

from mt.core.distributed import gather_objects
from mt.core.scoring import score
from mt.data.batching import make_batch, token_batches
from mt.data.corpora import lengths
from mt.data.tokenizer import PAD
from mt.decode.searcher import Searcher
from mt.decode.translator import Translator
from mt.train.trainer import Trainer


@torch.no_grad()
def validate(trainer: Trainer, dev: datasets.Dataset) -> dict:
    """Dev loss, perplexity, BLEU and chrF (with their signatures), and the first translation as a sample.

    Each process takes every W-th dev pair; the parts are gathered, so every process gets the same scores.
    """
    model, config, world = trainer.model.eval(), trainer.config, trainer.world
    mine = list(range(world.rank, len(dev), world.size))
    part = dev.select(mine)
    loss_sum, tokens = 0.0, 0
    for indices in token_batches(*lengths(part), config.train.max_tokens):
        rows = part[indices.tolist()]
        batch = make_batch(rows["src_ids"], rows["tgt_ids"]).to(trainer.device)
        with trainer.autocast():
            logits = model(batch.src, batch.tgt_input)                                     # [B, T, V]
        loss_sum += nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch.tgt_label.flatten(),
                                                ignore_index=PAD, reduction="sum").item()
        tokens += batch.num_tokens
    greedy = config.decode.replace(beam_size=1, nbest=1)  # fast, and comparable across runs
    translator = Translator(Searcher(model, trainer.device), trainer.tokenizer, config)
    hypotheses = [best[0].text for best in translator.translate_ids(part["src_ids"], greedy)]
    parts = gather_objects(world, (loss_sum, tokens, mine, hypotheses))
    loss = sum(p[0] for p in parts) / sum(p[1] for p in parts)
    in_order = [hyp for _, hyp in sorted((i, hyp) for p in parts for i, hyp in zip(p[2], p[3]))]
    scores = score(in_order, [dev["tgt"]], config.data.tgt_lang)
    return {"dev_loss": loss, "dev_ppl": math.exp(min(loss, 50.0)), "dev_bleu": scores.bleu,
            "dev_chrf": scores.chrf, "bleu_signature": scores.bleu_signature,
            "chrf_signature": scores.chrf_signature, "sample": in_order[0] if in_order else ""}
