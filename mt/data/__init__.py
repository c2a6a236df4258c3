"""Text pairs → SentencePiece pieces → token ids (cached) → padded, length-sorted batches."""
