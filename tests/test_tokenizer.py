"""SentencePiece BPE: fixed special ids, joint or separate vocabularies, save/load, clear errors."""

import pytest

from conftest import TINY_TOKENIZER
from mt.data.config import TokenizerConfig
from mt.core.errors import MtError
from mt.data.tokenizer import (BATCH_CALL_MIN, BOS, EOS, PAD, UNK, Sampling, Tokenizer, script_converter,
                               train_tokenizer)

ZH = ["我爱你。", "你好。", "我们明天去北京。", "谢谢你。"] * 30
EN = ["I love you.", "Hello.", "We will go to Beijing tomorrow.", "Thank you."] * 30


def test_special_ids_are_fixed(tokenizer):
    sp = tokenizer.src
    assert [sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()] == [PAD, UNK, BOS, EOS] == [0, 1, 2, 3]
    assert tokenizer.src_vocab_size == 600


def test_source_ends_with_eos_and_target_is_framed_by_bos_eos(tokenizer):
    [src], [tgt] = tokenizer.encode_src(["你好。"]), tokenizer.encode_tgt(["Hello."])
    assert src[-1] == EOS and BOS not in src
    assert tgt[0] == BOS and tgt[-1] == EOS
    assert tokenizer.decode_tgt([tgt[1:-1], tgt]) == ["Hello.", "Hello."]


def test_a_few_texts_and_many_give_the_same_pieces_and_text(tokenizer):
    many = (ZH * BATCH_CALL_MIN)[:BATCH_CALL_MIN]  # SentencePiece's batch call; fewer: one call per text
    ids = tokenizer.encode_src(many)
    assert ids[:3] == tokenizer.encode_src(many[:3])
    tgt = tokenizer.encode_tgt((EN * BATCH_CALL_MIN)[:BATCH_CALL_MIN])
    assert tokenizer.decode_tgt(tgt)[:3] == tokenizer.decode_tgt(tgt[:3]) == EN[:3]


def test_separate_vocabularies(tmp_path):
    tok = train_tokenizer(ZH, EN, TokenizerConfig(vocab_size=40, joint=False, byte_fallback=False))
    assert not tok.joint and tok.src is not tok.tgt
    src_pieces = "".join(tok.src.id_to_piece(i) for i in range(4, tok.src_vocab_size))
    tgt_pieces = "".join(tok.tgt.id_to_piece(i) for i in range(4, tok.tgt_vocab_size))
    assert "北" in src_pieces and "北" not in tgt_pieces  # each side has its own language's pieces
    assert "B" in tgt_pieces and "B" not in src_pieces
    tok.save(tmp_path)
    again = Tokenizer.load(tmp_path)
    assert not again.joint and again.vocab_hash == tok.vocab_hash


def test_save_and_load_keep_the_vocabulary(tokenizer, tmp_path):
    assert Tokenizer.load(tmp_path) is None
    tokenizer.save(tmp_path)
    loaded = Tokenizer.load(tmp_path)
    assert loaded.joint and loaded.vocab_hash == tokenizer.vocab_hash
    assert loaded.encode_src(["我们明天去北京。"]) == tokenizer.encode_src(["我们明天去北京。"])


def test_vocabulary_hash_tells_tokenizers_apart(tokenizer):
    other = train_tokenizer(ZH, EN, TokenizerConfig(vocab_size=60, byte_fallback=False))
    assert other.vocab_hash != tokenizer.vocab_hash


def test_byte_fallback_leaves_no_unknown_pieces():
    tok = train_tokenizer(ZH * 3, EN * 3, TokenizerConfig(vocab_size=300, byte_fallback=True))
    ids = tok.encode_src(["龘"])[0]  # a character absent from the training text
    assert UNK not in ids


def test_an_output_decodes_to_one_line_whatever_byte_pieces_it_holds():
    tok = train_tokenizer(ZH * 3, EN * 3, TokenizerConfig(vocab_size=300, byte_fallback=True))
    hello = tok.encode_tgt(["Hello."])[0]
    controls = [tok.tgt.piece_to_id(f"<0x{byte:02X}>") for byte in (0x0A, 0x0D, 0x00, 0x1B)]
    [text] = tok.decode_tgt([hello[:-1] + controls + hello[1:]])
    assert text.splitlines() == [text] and text.isprintable()
    assert text.startswith("Hello.") and text.endswith("Hello.")


def test_too_large_a_vocabulary_is_a_config_error():
    with pytest.raises(MtError, match="tokenizer.vocab_size"):
        train_tokenizer(ZH[:4], EN[:4], TINY_TOKENIZER)


def test_a_corpus_of_empty_lines_says_so():
    with pytest.raises(MtError, match="no non-empty lines"):
        train_tokenizer(["", "  "], ["", ""], TINY_TOKENIZER)


def test_traditional_and_simplified_chinese_meet_the_same_pieces():
    tok = train_tokenizer(ZH, EN, TokenizerConfig(vocab_size=400), ("simplified", "keep"))
    assert tok.encode_src(["我們明天去北京。"]) == tok.encode_src(["我们明天去北京。"])
    assert UNK not in tok.encode_src(["我們愛臺灣的電腦。"])[0]  # unseen characters fall back to bytes
    assert tok.encode_tgt(["Hello."]) == Tokenizer(tok.src_proto).encode_tgt(["Hello."])  # English untouched
    kept = Tokenizer(tok.src_proto, None, ("keep", "keep"))
    assert kept.encode_src(["我們"]) != tok.encode_src(["我們"])


def both_scripts(lines: list[str]) -> list[str]:
    """Each line, and each line in Traditional characters (OpenCC)."""
    return lines + script_converter("traditional")(lines)


def test_a_model_file_that_converts_script_itself_gives_mts_pieces(tokenizer, corpus_dir):
    import sentencepiece as spm

    zh = (corpus_dir / "train.zh").read_text(encoding="utf-8").splitlines()
    en = (corpus_dir / "train.en").read_text(encoding="utf-8").splitlines()
    tok = Tokenizer(tokenizer.src_proto, None, ("simplified", "keep"))
    lines = both_scripts(zh) + ["ＡＢＣ　全角，憑藉這些長頭髮  ", "乾燥的頭髮", "皇后"]
    converting = tok.self_converting()
    model_file = spm.SentencePieceProcessor(model_proto=converting.src_proto)  # as another program reads it
    assert [ids + [EOS] for ids in model_file.encode(lines)] == tok.encode_src(lines)
    assert converting.encode_src(lines) == tok.encode_src(lines)  # mt does not convert a second time
    assert converting.encode_tgt(en) == tok.encode_tgt(en) and converting.src_vocab_size == tok.src_vocab_size
    assert converting.self_converting().src_proto == converting.src_proto  # compiled once
    unconverted = Tokenizer(tok.src_proto)
    assert unconverted.self_converting().src_proto == tok.src_proto  # "keep": nothing to compile
    assert [ids + [EOS] for ids in model_file.encode(lines)] != unconverted.encode_src(lines)


def test_each_side_of_separate_vocabularies_converts_into_its_own_script():
    tok = train_tokenizer(EN, ZH, TokenizerConfig(vocab_size=40, joint=False, byte_fallback=False),
                          ("keep", "traditional"))
    converting = tok.self_converting()
    assert converting.src_proto == tok.src_proto and converting.tgt_proto != tok.tgt_proto
    lines = ["我们明天去北京。", "我們明天去北京。"]
    assert converting.encode_tgt(lines) == tok.encode_tgt(lines) == tok.encode_tgt(lines[1:] * 2)


def test_a_tokenizer_pickles_with_its_script_conversion():  # datasets.map sends it to other processes
    import pickle

    tok = Tokenizer(train_tokenizer(ZH, EN, TokenizerConfig(vocab_size=400)).src_proto, None, ("simplified", "keep"))
    again = pickle.loads(pickle.dumps(tok))
    assert again.scripts == ("simplified", "keep") and again.encode_src(["我們"]) == tok.encode_src(["我们"])


def test_a_sampled_segmentation_repeats_with_its_seed_and_spells_the_same_text(tokenizer):
    texts = ["Tom is reading a newspaper in the kitchen.", "I don't understand why she left so early."] * 20
    best = tokenizer.encode_tgt(texts)
    first, again, other = (tokenizer.encode_tgt(texts, Sampling(0.3, seed)) for seed in (1, 1, 2))
    assert first == again and first != other and first != best
    assert tokenizer.decode_tgt(first) == tokenizer.decode_tgt(best)  # other pieces, the same sentences
    assert sum(map(len, first)) > sum(map(len, best))  # dropped merges: more, shorter pieces
    assert tokenizer.encode_tgt(texts) == best  # no sampling: always the best segmentation
