"""Source ids → translations: the incremental cache, greedy and beam search, the Translator (text in, text out)
with mt's own engine or a CTranslate2 export, and evaluation on a test set."""
