"""The model section of a config: the Transformer's shape, each key with its default, help and range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import model_validator

from mt.core.schema import SECTION, Bool, Fraction, NonNegativeFloat, Positive, key, key_error

Norm = Literal["post", "pre"]  # post: Add&Norm as in the paper; pre: LayerNorm before each sub-layer
Positions = Literal["sinusoidal", "learned"]  # learned: a trained vector per position (the paper's Table 3, row E)
Activation = Literal["relu", "swish"]  # the feed-forward network's: the paper's max(0, x), or Marian's x·sigmoid(x)


@dataclass
class ModelConfig:
    """The Transformer's shape. Defaults are the paper's base model."""

    __pydantic_config__ = SECTION

    d_model: Positive = key(512, "Width of every layer's input and output (the residual stream).")
    num_heads: Positive = key(8, "Attention heads per attention layer; must divide d_model.")
    d_ff: Positive = key(2048, "Inner width of the position-wise feed-forward network.")
    num_encoder_layers: Positive = key(6, "Encoder layers (N in the paper).")
    num_decoder_layers: Positive = key(6, "Decoder layers.")
    dropout: Fraction = key(0.1, "Dropout on sub-layer outputs and on embeddings + positions (the paper's P_drop).")
    norm: Norm = key("post", "post: Add&Norm after each sub-layer, as in the paper; pre: LayerNorm before it.")
    positions: Positions = key("sinusoidal", "sinusoidal, as in the paper; or learned: a trained vector per "
                               "position (the paper's Table 3, row E).")
    tie_embeddings: Bool = key(True, "Share the source and target embeddings and the generator (joint vocabulary "
                               "only).")
    init_std: NonNegativeFloat = key(0.0, "0: Glorot-uniform projections (tensor2tensor); > 0: every weight drawn "
                                     "from N(0, init_std²), as BERT and Marian do.")
    max_positions: Positive = key(1024, "Rows of the position table: the longest sentence, in tokens, the model "
                                  "reads.")
    activation: Activation = key("relu", "The feed-forward network's activation: relu, as in the paper; or swish "
                                 "(x·sigmoid(x)), as Marian's models (OPUS-MT) have.")
    output_bias: Bool = key(False, "A bias on the generator's logits, as Marian's models have (final_logits_bias); "
                            "the paper's has none.")

    @model_validator(mode="after")
    def _heads_divide_the_width(self) -> ModelConfig:
        if self.d_model % self.num_heads:
            raise key_error(f"must divide model.d_model ({self.d_model})", "num_heads")
        return self
