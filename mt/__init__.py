"""mt: train your own Transformer translation model, from text files to BLEU."""

__version__ = "0.1.0"
