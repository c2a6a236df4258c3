"""Reading corpora (files, TSV, JSONL, hub layout), tokenising with a cache, filtering."""

import gzip
import json
import pickle

import datasets
import pytest

from conftest import write_lines
import numpy as np

from mt.data.config import CorpusConfig, DataConfig
from mt.data.corpora import TrainingMixture, encode_corpus, filter_pairs, read_corpus, take_rows, tokenizer_sample
from mt.core.errors import MtError
from mt.data.tokenizer import BOS, EOS


def test_aligned_files_are_read_as_pairs(corpus_dir):
    data = DataConfig()
    pairs = read_corpus(CorpusConfig(path=str(corpus_dir / "dev")), data, "dev")
    assert len(pairs) == 20 and pairs.column_names == ["src", "tgt"]
    assert pairs[0]["tgt"] == (corpus_dir / "dev.en").read_text(encoding="utf-8").splitlines()[0]


def test_misaligned_files_name_both_files(tmp_path):
    write_lines(tmp_path / "c.zh", ["一", "二", "三"])
    write_lines(tmp_path / "c.en", ["one", "two"])
    with pytest.raises(MtError, match=r"c\.zh has 3 lines but .*c\.en has 2"):
        read_corpus(CorpusConfig(path=str(tmp_path / "c")), DataConfig(), "train")


def test_invalid_utf8_names_the_line(tmp_path):
    (tmp_path / "c.zh").write_bytes("一\n二\n".encode() + b"\xff\xfe bad\n")
    write_lines(tmp_path / "c.en", ["one", "two", "three"])
    with pytest.raises(MtError, match=r"c\.zh:3: invalid UTF-8"):
        read_corpus(CorpusConfig(path=str(tmp_path / "c")), DataConfig(), "train")


def test_gzipped_aligned_files_read_like_plain_ones_empty_lines_and_carriage_returns_included(tmp_path):
    lines_zh, lines_en = ["一", "", "三\r"], ["", "two", "three"]
    with gzip.open(tmp_path / "c.zh.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines_zh) + "\n")
    with gzip.open(tmp_path / "c.en.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines_en))  # no final newline
    pairs = read_corpus(CorpusConfig(path=str(tmp_path / "c")), DataConfig(), "train")
    assert list(pairs["src"]) == ["一", "", "三"] and list(pairs["tgt"]) == ["", "two", "three"]


def test_invalid_utf8_in_a_gzipped_file_names_the_line(tmp_path):
    with gzip.open(tmp_path / "c.zh.gz", "wb") as f:
        f.write("一\n二\n".encode() + b"\xff bad\n")
    with gzip.open(tmp_path / "c.en.gz", "wb") as f:
        f.write(b"one\ntwo\nthree\n")
    with pytest.raises(MtError, match=r"c\.zh\.gz:3: invalid UTF-8"):
        read_corpus(CorpusConfig(path=str(tmp_path / "c")), DataConfig(), "train")


def test_the_tokenizer_learns_from_a_random_sample_of_a_big_corpus(corpus_dir):
    pairs = read_corpus(CorpusConfig(path=str(corpus_dir / "train")), DataConfig(), "train")
    rows = np.arange(len(pairs))
    src, tgt = tokenizer_sample(pairs, rows, 50, seed=1)
    assert len(src) == len(tgt) == 50 and len(set(src)) > 45
    assert set(zip(src, tgt)) <= set(zip(pairs["src"], pairs["tgt"]))  # whole pairs
    assert src != list(pairs["src"][:50])
    assert tokenizer_sample(pairs, rows, 10_000, seed=1) == (list(pairs["src"]), list(pairs["tgt"]))


def test_a_training_mixture_samples_and_repeats_its_corpora(corpus_dir, tokenizer, tmp_path):
    write_lines(tmp_path / "small.zh", ["一", "二", "三"])
    write_lines(tmp_path / "small.en", ["one", "two", "three"])
    data = DataConfig(train=CorpusConfig(path=str(corpus_dir / "train"), max_pairs=40),
                      extra_train=[CorpusConfig(path=str(tmp_path / "small"), repeat=5)])
    mixture = TrainingMixture(data, seed=1)
    encoded, rows = mixture.encode(tokenizer, tmp_path / "cache", max_len=64)
    assert len(encoded) == 43 and len(rows) == 40 + 3 * 5
    texts = encoded.select(rows.tolist())["tgt"]
    assert all(texts.count(word) == 5 for word in ("one", "two", "three"))
    big = read_corpus(data.train, data, "train")["tgt"]
    sampled = texts[:40]
    assert len(set(sampled)) > 35 and set(sampled) <= set(big) and sampled != big[:40]
    assert TrainingMixture(data, seed=1).parts[0]["tgt"] == sampled  # the same sample again: same seed


def test_missing_file_is_named(tmp_path):
    with pytest.raises(MtError, match=r"nothere\.zh: no such file"):
        read_corpus(CorpusConfig(path=str(tmp_path / "nothere")), DataConfig(), "train")


def test_tsv_and_jsonl(tmp_path):
    write_lines(tmp_path / "c.tsv", ["你好\tHello", "谢谢\tThanks"])
    pairs = read_corpus(CorpusConfig(path=str(tmp_path / "c.tsv")), DataConfig(), "train")
    assert pairs["src"] == ["你好", "谢谢"] and pairs["tgt"] == ["Hello", "Thanks"]
    write_lines(tmp_path / "bad.tsv", ["你好\tHello", "no tab here"])
    with pytest.raises(MtError, match=r"bad\.tsv:2: expected 2 tab-separated fields"):
        read_corpus(CorpusConfig(path=str(tmp_path / "bad.tsv")), DataConfig(), "train")
    write_lines(tmp_path / "c.jsonl", [json.dumps({"zh": "你好", "en": "Hello"}, ensure_ascii=False)])
    pairs = read_corpus(CorpusConfig(path=str(tmp_path / "c.jsonl")), DataConfig(), "train")
    assert pairs[0] == {"src": "你好", "tgt": "Hello"}
    write_lines(tmp_path / "bad.jsonl", ['{"zh": "a", "en": "b"}', '{"zh": '])
    with pytest.raises(MtError, match=r"bad\.jsonl:2: not valid JSON"):
        read_corpus(CorpusConfig(path=str(tmp_path / "bad.jsonl")), DataConfig(), "train")


def make_hub_layout(root):
    """A local dataset laid out like Helsinki-NLP/opus-100: one folder per config with parquet splits."""
    rows = {"translation": [{"en": "Hello", "zh": "你好"}, {"en": "Thanks", "zh": "谢谢"}, {"en": "Bye", "zh": "再见"}]}
    (root / "en-zh").mkdir(parents=True)
    datasets.Dataset.from_dict(rows).to_parquet(root / "en-zh" / "train-00000-of-00001.parquet")
    datasets.Dataset.from_dict(rows).to_parquet(root / "en-zh" / "test-00000-of-00001.parquet")
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: en-zh\n  data_files:\n  - split: train\n    path: en-zh/train-*\n"
        "  - split: test\n    path: en-zh/test-*\n---\n", encoding="utf-8")


def test_hub_dataset_with_nested_translation_fields(tmp_path):
    make_hub_layout(tmp_path / "opus")
    corpus = CorpusConfig(hub=str(tmp_path / "opus"), hub_config="en-zh", split="train[:2]",
                          src_field="translation.zh", tgt_field="translation.en")
    pairs = read_corpus(corpus, DataConfig(), "train")
    assert pairs["src"] == ["你好", "谢谢"] and pairs["tgt"] == ["Hello", "Thanks"]
    with pytest.raises(MtError, match=r"no field 'zh'"):
        read_corpus(CorpusConfig(hub=str(tmp_path / "opus"), hub_config="en-zh"), DataConfig(), "train")
    with pytest.raises(MtError, match=r"data\.train\.hub: cannot load"):
        read_corpus(CorpusConfig(hub=str(tmp_path / "opus"), hub_config="en-zh", split="nosuch"),
                    DataConfig(), "train")


def test_filtering_counts_empty_and_long_pairs(tokenizer, tmp_path):
    pairs = datasets.Dataset.from_dict({"src": ["你好", "", "谢谢 " * 40, "再见"],
                                        "tgt": ["Hello", "Empty source", "Thanks", "   "]})
    encoded = encode_corpus(pairs, tokenizer, tmp_path, "f")
    rows, report = filter_pairs(encoded, max_len=20, name="train")
    assert encoded.select(rows)["src"] == ["你好"]
    assert report == "train: 4 pairs, kept 1 (dropped 2 with an empty side, 1 longer than 20 tokens)"
    with pytest.raises(MtError, match="no pairs left"):
        filter_pairs(encode_corpus(pairs.select([1]), tokenizer, tmp_path, "g"), max_len=20, name="train")


def test_tokenised_corpus_is_cached_per_text_and_vocabulary(tokenizer, tmp_path):
    pairs = datasets.Dataset.from_dict({"src": ["你好"], "tgt": ["Hello"]})
    first = encode_corpus(pairs, tokenizer, tmp_path, "train")
    files = list(tmp_path.glob("train-*.arrow"))
    assert len(files) == 1
    assert encode_corpus(pairs, tokenizer, tmp_path, "train")["src_ids"] == first["src_ids"]
    assert len(list(tmp_path.glob("train-*.arrow"))) == 1  # reused, not rebuilt
    other = datasets.Dataset.from_dict({"src": ["谢谢"], "tgt": ["Thanks"]})
    encode_corpus(other, tokenizer, tmp_path, "train")
    assert len(list(tmp_path.glob("train-*.arrow"))) == 2  # new text, new cache entry
    assert first[0]["tgt_ids"][0] == BOS and first[0]["tgt_ids"][-1] == EOS and first[0]["src_ids"][-1] == EOS


def test_a_tagged_corpus_puts_its_tag_before_each_source_and_the_tokenizer_keeps_it_one_piece(corpus_dir, tmp_path):
    from mt.config import Config
    from mt.data.config import TokenizerConfig
    from mt.model.config import ModelConfig
    from mt.train.prepare import prepare

    write_lines(tmp_path / "bt.zh", ["我们今天去。", "他很好。", "你好。"])
    write_lines(tmp_path / "bt.en", ["We go today.", "He is well.", "Hello."])
    data = DataConfig(train=CorpusConfig(path=str(corpus_dir / "train")),
                      dev=CorpusConfig(path=str(corpus_dir / "dev")), max_len=32,
                      extra_train=[CorpusConfig(path=str(tmp_path / "bt"), tag="<BT>", synthetic=True)])
    config = Config(model=ModelConfig(max_positions=64), data=data,
                    tokenizer=TokenizerConfig(vocab_size=600, byte_fallback=False))
    config.train.run_dir = str(tmp_path / "run")
    prepared = prepare(config)
    tokenizer = prepared.tokenizer
    assert "<BT>" in tokenizer.src.encode("<BT> 你好。", out_type=str)
    sources = TrainingMixture(data, seed=1).parts[1]["src"]
    assert sources == ["<BT> 我们今天去。", "<BT> 他很好。", "<BT> 你好。"]
    assert "<BT>" not in "".join(TrainingMixture(data, seed=1).parts[0]["src"])  # the other corpus: untagged


@pytest.mark.parametrize("corpus, words", [({"tag": "<B T>"}, "without spaces"), ({"tag": " <BT>"}, "without spaces")])
def test_a_tag_is_one_token(corpus, words, corpus_dir):
    from mt.config import config_from_dict

    raw = {"data": {"train": {"path": str(corpus_dir / "train"), **corpus}}}
    with pytest.raises(MtError, match=words):
        config_from_dict(raw, source="test.yaml")


def test_the_rows_cleaning_keeps_cost_their_own_size_to_send_to_a_process():
    """`datasets.map` with several processes pickles each shard of an in-memory corpus for its process: the pairs
    cleaning or sampling kept must cost about their own size, not that of a table of one-row slices, each pickled
    with the whole corpus's buffers (for 2M pairs, more memory than a machine has)."""
    pairs = datasets.Dataset.from_dict({"src": [f"第{i}句" for i in range(2000)],
                                        "tgt": [f"line {i}" for i in range(2000)]})
    kept = take_rows(pairs, np.arange(0, 2000, 2), "every other")
    assert kept["src"] == pairs["src"][::2] and kept["tgt"] == pairs["tgt"][::2]
    assert len(pickle.dumps(kept.shard(2, 0, contiguous=True))) < 2 * kept.data.nbytes + 10_000
