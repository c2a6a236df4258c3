"""The paper's encoder-decoder Transformer, box by box (transformer.py), and its dropout."""
