"""Sampling: each next token drawn at random from the model's distribution, narrowed by top_k, top_p and
temperature, for varied outputs (back-translation, decode.sample). Greedy search (mt/decode/search.py) draws its
tokens with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mt.config import DecodeConfig


@dataclass
class TokenSampling:
    """Sampling's draw of each next token: from the top_k likeliest, then from the fewest whose probabilities reach
    top_p (Holtzman et al., 2020), after dividing the log-probabilities by the temperature."""

    top_k: int
    top_p: float
    temperature: float
    generator: torch.Generator

    @classmethod
    def of(cls, decode: DecodeConfig, device: torch.device) -> TokenSampling:
        generator = torch.Generator(device=device).manual_seed(decode.seed)
        return cls(decode.top_k, decode.top_p, decode.temperature, generator)

    def draw(self, log_probs: Tensor) -> Tensor:
        """log_probs [N, V] → one token per row [N]."""
        logits = log_probs / self.temperature                                    # [N, V]
        if self.top_k:
            kth = logits.topk(min(self.top_k, logits.size(-1)), dim=-1).values[:, -1:]   # [N, 1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            ranked, order = logits.sort(dim=-1, descending=True)
            probs = ranked.softmax(dim=-1)
            outside = probs.cumsum(dim=-1) - probs >= self.top_p                 # the mass before it reaches p
            logits = logits.scatter(-1, order, ranked.masked_fill(outside, float("-inf")))
        return torch.multinomial(logits.softmax(dim=-1), 1, generator=self.generator).squeeze(-1)
