"""Models in and out of mt: checkpoints, and exports to CTranslate2 and Hugging Face."""
