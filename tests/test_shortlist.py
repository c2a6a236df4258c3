"""Lexical shortlists: a search narrowed to some target pieces outputs only those, finds what the full search finds
when they hold it, and `mt shortlist` learns word translations from a model's training corpus."""

import pytest
import torch

from conftest import tiny_yaml
from mt.core.errors import MtError
from mt.data.tokenizer import BOS, EOS, PAD, UNK
from mt.decode.search import beam_search, greedy_search
from mt.decode.shortlist import FORMAT, Shortlist, learn_shortlist, shortlisted
from test_cli import assert_one_line_error, mt, mt_in_process
from test_search import MAX_LEN, SRC, peaky_model

VOCAB = 40


def search(model, vocab, beam: int, **options):
    """The n-best lists of SRC, narrowed to `vocab` (None: the whole vocabulary)."""
    with shortlisted([model], vocab):
        if beam == 1:
            return [[h] for h in greedy_search(model, SRC, MAX_LEN, vocab=vocab, **options)]
        return beam_search(model, SRC, MAX_LEN, beam_size=beam, nbest=beam, vocab=vocab, **options)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_shortlist_of_every_piece_changes_nothing(beam):
    model = peaky_model(vocab=VOCAB)
    options = {"alpha": 0.6, "min_len": 2, "no_repeat_ngram_size": 2}
    every = torch.tensor([i for i in range(VOCAB) if i not in (PAD, BOS)])
    full, narrowed = search(model, None, beam, **options), search(model, every, beam, **options)
    for a, b in zip(full, narrowed):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    assert model.generator.proj.out_features == VOCAB  # the model's own generator is back


@pytest.mark.parametrize("beam", [1, 3])
def test_a_search_outputs_only_the_shortlists_pieces(beam):
    model = peaky_model(vocab=VOCAB)
    full = search(model, None, beam, no_repeat_ngram_size=2)
    used = sorted({t for hyps in full for h in hyps for t in h.tokens})
    kept = torch.tensor(sorted(set(used[::2]) | {EOS, UNK}))  # half of what the full search used
    narrowed = search(model, kept, beam, no_repeat_ngram_size=2)
    assert {t for hyps in narrowed for h in hyps for t in h.tokens} <= set(kept.tolist())
    assert narrowed != full


def test_greedy_search_finds_the_same_tokens_when_the_shortlist_holds_them():
    model = peaky_model(vocab=VOCAB)
    full = search(model, None, 1)
    used = {t for hyps in full for h in hyps for t in h.tokens}
    narrowed = search(model, torch.tensor(sorted(used | {EOS, 30, 31})), 1)
    assert [h[0].tokens for h in narrowed] == [h[0].tokens for h in full]


def test_a_batchs_targets_join_its_pieces_translations_the_frequent_ones_and_copies():
    translations = torch.full((VOCAB, 2), -1)
    translations[5] = torch.tensor([20, 21])
    translations[6, 0] = 22
    shortlist = Shortlist(translations, torch.tensor([EOS, UNK, 30]), joint=True, vocab_hash="h")
    assert shortlist.targets([[5, EOS], [6, 7, EOS]]).tolist() == [UNK, EOS, 5, 6, 7, 20, 21, 22, 30]
    shortlist.joint = False
    assert shortlist.targets([[6, BOS, PAD, EOS]]).tolist() == [UNK, EOS, 22, 30]


def test_learned_translations_are_the_words_that_go_together(tokenizer):
    src = ["他走了。", "她走了。", "她很好。", "他在这里。", "她在这里。"] * 40
    tgt = ["He left.", "She left.", "She is good.", "He is here.", "She is here."] * 40
    found = learn_shortlist(src, tgt, tokenizer, translations=2, frequent=5)
    he, she = (tokenizer.src.piece_to_id(piece) for piece in ("▁他", "▁她"))
    assert "▁He" in tokenizer.tgt.id_to_piece(found.translations[he].tolist())
    assert "▁She" in tokenizer.tgt.id_to_piece(found.translations[she].tolist())
    assert "▁He" not in tokenizer.tgt.id_to_piece(found.translations[she].tolist())
    assert {EOS, UNK} <= set(found.always.tolist()) and len(found.always) == 7


def test_a_foreign_or_mismatched_file_is_refused_in_one_line(tmp_path):
    foreign = tmp_path / "weights.pt"
    torch.save({"model": torch.zeros(2)}, foreign)
    with pytest.raises(MtError, match="not a shortlist"):
        Shortlist.load(foreign, "h", (VOCAB, VOCAB))
    damaged = tmp_path / "damaged.pt"
    torch.save({"format": FORMAT, "translations": torch.zeros(2)}, damaged)
    with pytest.raises(MtError, match="damaged"):
        Shortlist.load(damaged, "h", (VOCAB, VOCAB))
    made = tmp_path / "shortlist.pt"
    Shortlist(torch.full((VOCAB, 2), -1), torch.tensor([EOS]), True, "other").save(made)
    with pytest.raises(MtError, match="another vocabulary"):
        Shortlist.load(made, "h", (VOCAB, VOCAB))
    assert Shortlist.load(made, "other", (VOCAB, VOCAB)).vocab_hash == "other"
    with pytest.raises(MtError, match="do not fit"):  # ids past the model's target pieces
        Shortlist.load(made, "other", (VOCAB, EOS))


def test_mt_shortlist_then_translate_with_it(corpus_dir, tmp_path):
    (tmp_path / "tiny.yaml").write_text(tiny_yaml(corpus_dir, tmp_path / "run", max_steps=4, eval_every=4),
                                        encoding="utf-8")
    assert mt("train", "--config", "tiny.yaml", cwd=tmp_path).returncode == 0
    best = str(tmp_path / "run" / "checkpoints" / "best.pt")
    made = mt_in_process("shortlist", "--checkpoint", best, "-o", "list.pt", cwd=tmp_path)
    assert made.exit_code == 0, made.output
    translated = mt_in_process("translate", "--checkpoint", best, "--shortlist", "list.pt", "我爱你。",
                               cwd=tmp_path)
    assert translated.exit_code == 0 and translated.stdout.count("\n") == 1, translated.output
    assert_one_line_error(mt("shortlist", "--checkpoint", best, "-o", "tiny.yaml", cwd=tmp_path),
                          "tiny.yaml", "not a shortlist")
    for given, why in (("tiny.yaml", "not a shortlist"), ("nothere.pt", "no such file")):
        assert_one_line_error(mt("translate", "--checkpoint", best, "--shortlist", given, "你好", cwd=tmp_path),
                              given, why)
