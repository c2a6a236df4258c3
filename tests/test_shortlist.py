"""Lexical shortlists: a search narrowed to some target pieces outputs only those, finds what the full search finds
when they hold it, and `mt shortlist` learns word translations from a model's training corpus."""

import json

import pytest
import torch

from conftest import tiny_yaml
from mt.core.errors import MtError
from mt.data.tokenizer import BOS, EOS, PAD, UNK
from mt.decode.search import beam_search, greedy_search
from mt.decode.shortlist import FORMAT, Shortlist, learn_shortlist
from test_cli import assert_one_line_error, mt, mt_in_process
from test_search import MAX_LEN, SRC, peaky_model

VOCAB = 40


def search(model, vocab, beam: int, **options):
    """The n-best lists of SRC, narrowed to `vocab` (None: the whole vocabulary)."""
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
    assert model.generator.proj.out_features == VOCAB  # the model's own generator is untouched


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


def test_mt_shortlist_learns_from_parallel_files_given(trained_runs, tmp_path):
    """A model whose config names no corpus of its own (an imported one) learns its shortlist from --src, --tgt."""
    from mt.exchange.checkpoint import load_model

    best = str(trained_runs[0] / "checkpoints" / "best.pt")
    tokenizer = load_model(best, torch.device("cpu"))[1]
    (tmp_path / "a.zh").write_text("他走了。\n她走了。\n他在这里。\n" * 30, encoding="utf-8")
    (tmp_path / "a.en").write_text("He left.\nShe left.\nHe is here.\n" * 30, encoding="utf-8")
    made = mt_in_process("shortlist", "--checkpoint", best, "--src", "a.zh", "--tgt", "a.en", "--translations", "1",
                         "-o", "list.pt", cwd=tmp_path)
    assert made.exit_code == 0 and "from 90 pairs" in made.output, made.output
    found = Shortlist.load(tmp_path / "list.pt", tokenizer.vocab_hash, (tokenizer.src_vocab_size,
                                                                        tokenizer.tgt_vocab_size))
    assert tokenizer.tgt.id_to_piece(found.translations[tokenizer.src.piece_to_id("▁她")].tolist()) == ["▁She"]
    (tmp_path / "b.en").write_text("He left.\n", encoding="utf-8")
    assert_one_line_error(mt("shortlist", "--checkpoint", best, "--src", "a.zh", "--tgt", "b.en", "-o", "b.pt",
                             cwd=tmp_path), "b.en", "give one translation per source line")
    assert_one_line_error(mt("shortlist", "--checkpoint", best, "--src", "a.zh", "-o", "b.pt", cwd=tmp_path),
                          "--tgt", "neither")
    for name in ("empty.zh", "empty.en"):
        (tmp_path / name).write_text("\n\n", encoding="utf-8")
    assert_one_line_error(mt("shortlist", "--checkpoint", best, "--src", "empty.zh", "--tgt", "empty.en", "-o",
                             "b.pt", cwd=tmp_path), "nothing to learn a shortlist from")
    assert not (tmp_path / "b.pt").exists()


@pytest.mark.parametrize("beam", [1, 3])
def test_ctranslate2_takes_a_shortlist_as_its_vocabulary_map_and_searches_as_mt_does(beam, tokenizer, corpus_dir,
                                                                                       tmp_path):
    """`--engine ctranslate2 --shortlist` gives mt's own narrowed output; `mt export --shortlist` writes the map
    as vmap.txt, which CTranslate2 itself reads with use_vmap."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from mt.decode.translator import load_translator
    from test_ct2 import untrained_checkpoint

    checkpoint = untrained_checkpoint(tokenizer, tmp_path / "model.pt")
    src, tgt = ((corpus_dir / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("zh", "en"))
    shortlist = learn_shortlist(src, tgt, tokenizer, translations=3, frequent=5)
    shortlist.save(tmp_path / "list.pt")
    made = mt_in_process("export", "--checkpoint", str(checkpoint), "--ctranslate2", "ct2", "--shortlist",
                         "list.pt", cwd=tmp_path)
    assert made.exit_code == 0, made.output
    mt_engine = load_translator(checkpoint, "cpu")
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()[:8]
    # one output limit for all: CTranslate2 searches a batch in one call, so its map is the whole batch's
    decode = mt_engine.decode.replace(beam_size=beam, alpha=0.0, max_len_a=0.0, max_len_b=12,
                                      shortlist=str(tmp_path / "list.pt"), guard=False)  # no retries' own batches
    ours = [t[0].text for t in mt_engine.translate(lines, decode)]
    assert ours != [t[0].text for t in mt_engine.translate(lines, decode.replace(shortlist=""))]
    assert [t[0].text for t in ct2.translate(lines, decode)] == ours

    pieces = [[tokenizer.src.id_to_piece(i) for i in ids] for ids in ct2.encode(lines)]
    allowed = {tokenizer.tgt.id_to_piece(i) for i in shortlist.targets(ct2.encode(lines)).tolist()}
    raw = ctranslate2.Translator(str(tmp_path / "ct2"), compute_type="float32")
    narrowed, full = ([r.hypotheses[0] for r in raw.translate_batch(pieces, beam_size=1, max_decoding_length=12,
                                                                     use_vmap=use)] for use in (True, False))
    assert {p for hyp in narrowed for p in hyp} <= allowed | {"<s>"} and narrowed != full


def test_a_shortlist_for_another_model_or_export_is_one_line(trained_runs, tmp_path):
    pytest.importorskip("ctranslate2")
    checkpoint = str(trained_runs[0] / "checkpoints" / "last.pt")
    Shortlist(torch.full((VOCAB, 2), -1), torch.tensor([EOS]), True, "other").save(tmp_path / "other.pt")
    assert_one_line_error(mt("export", "--checkpoint", checkpoint, "--ctranslate2", "ct2", "--shortlist", "other.pt",
                             cwd=tmp_path), "other.pt", "another vocabulary")
    assert not (tmp_path / "ct2").exists()
    assert_one_line_error(mt("export", "--checkpoint", checkpoint, "--huggingface", "hf", "--shortlist", "other.pt",
                             cwd=tmp_path), "--shortlist", "CTranslate2's")
    assert mt("export", "--checkpoint", checkpoint, "--ctranslate2", "ct2", cwd=tmp_path).returncode == 0
    assert_one_line_error(mt("translate", "--engine", "ctranslate2", "--checkpoint", "ct2", "--shortlist", "other.pt",
                             "你好", cwd=tmp_path), "other.pt", "another vocabulary")
    meta = json.loads((tmp_path / "ct2" / "mt.json").read_text(encoding="utf-8"))
    del meta["vocab_hash"]  # as exports made before it was kept: no shortlist can be matched to it
    (tmp_path / "ct2" / "mt.json").write_text(json.dumps(meta), encoding="utf-8")
    assert_one_line_error(mt("translate", "--engine", "ctranslate2", "--checkpoint", "ct2", "--shortlist", "other.pt",
                             "你好", cwd=tmp_path), "ct2", "export it again")


def test_mt_serve_gives_ctranslate2_one_thread_per_core_as_mt_translate_does(trained_runs, tmp_path, monkeypatch):
    """The server loads mt's own model without a thread team of its own (mt/core/openmp.py); CTranslate2's
    translator keeps the thread count it is built with, so it is built with torch's."""
    pytest.importorskip("ctranslate2")
    import mt.serve.server
    from mt.exchange.ctranslate2 import export_ctranslate2

    export_ctranslate2(trained_runs[0] / "checkpoints" / "last.pt", tmp_path / "ct2")
    served = []
    monkeypatch.setattr(mt.serve.server, "serve", lambda translator, *args: served.append(translator))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        result = mt_in_process("serve", "--engine", "ctranslate2", "--checkpoint", "ct2", cwd=tmp_path)
    finally:
        torch.set_num_threads(threads)
    assert result.exit_code == 0, result.output
    assert served[0].engine.options["intra_threads"] == 2
