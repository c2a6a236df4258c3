"""`mt distill`: a teacher's translations of source lines become a corpus of pairs; a stopped distillation continues
to the same files as an uninterrupted one; one made another way, or a directory of something else, is refused."""

import json
from pathlib import Path

import pytest

from conftest import write_lines
from mt.config import load_config
from mt.core.errors import MtError
from mt.decode.distill import STATE_FILE, corpus_files, distill, recipe
from mt.decode.translator import load_translator
from test_cli import assert_one_line_error, mt, mt_in_process

CHUNK = 7  # lines per chunk: several chunks from a few lines


@pytest.fixture(scope="module")
def teacher(trained_runs):
    checkpoint = trained_runs[0] / "checkpoints" / "best.pt"
    translator = load_translator(checkpoint, "cpu")
    return checkpoint, translator, translator.decode.replace(beam_size=2, max_len_a=0.0, max_len_b=8)


@pytest.fixture
def sources(corpus_dir, tmp_path) -> list[Path]:
    """Two source files, with an empty line and surrounding spaces among 30 lines."""
    zh = (corpus_dir / "train.zh").read_text(encoding="utf-8").splitlines()
    first, second = tmp_path / "a.zh", tmp_path / "b.zh"
    write_lines(first, zh[:12] + ["", f"  {zh[12]}  "])
    write_lines(second, zh[13:29])
    return [first, second]


def files(output: Path, translator) -> tuple[list[str], list[str]]:
    return tuple(path.read_text(encoding="utf-8").splitlines() for path in corpus_files(output, translator))


def test_each_non_empty_line_and_the_teachers_translation_become_a_pair(teacher, sources, tmp_path):
    checkpoint, translator, decode = teacher
    made_by = recipe([checkpoint], sources, decode, "mt", "float32", CHUNK)
    done = distill(translator, made_by, sources, tmp_path / "d", decode)
    lines = [line.strip() for path in sources for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    src, tgt = files(tmp_path / "d", translator)
    assert (done.read, done.pairs, done.complete) == (30, 29, True)
    assert src == lines and tgt == translator.translate_lines(lines, decode)  # chunks change nothing
    assert [p.name for p in corpus_files(tmp_path / "d", translator)] == ["train.zh", "train.en"]


def test_a_stopped_distillation_continues_to_the_same_corpus(teacher, sources, tmp_path):
    checkpoint, translator, decode = teacher
    made_by = recipe([checkpoint], sources, decode, "mt", "float32", CHUNK)
    distill(translator, made_by, sources, tmp_path / "whole", decode)
    chunks = []

    def stop_after_two(lines: int) -> None:
        chunks.append(lines)
        if len(chunks) == 3:  # the start, then two chunks
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        distill(translator, made_by, sources, tmp_path / "stopped", decode, stop_after_two)
    for path in corpus_files(tmp_path / "stopped", translator):  # a chunk half written when the stop came
        with open(path, "ab") as f:
            f.write("半句".encode("utf-8"))
    seen = []
    done = distill(translator, made_by, sources, tmp_path / "stopped", decode, seen.append)
    assert seen[0] == 2 * CHUNK and done.complete  # it went on from the third chunk
    assert files(tmp_path / "stopped", translator) == files(tmp_path / "whole", translator)
    again = []
    assert distill(translator, made_by, sources, tmp_path / "stopped", decode, again.append).pairs == 29
    assert again == []  # complete: nothing translated again
    state = json.loads((tmp_path / "stopped" / STATE_FILE).read_text(encoding="utf-8"))
    del state["recipe"]["decode"]["shortlist"], state["recipe"]["compute_type"]  # as made before mt had these keys
    (tmp_path / "stopped" / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
    assert distill(translator, made_by, sources, tmp_path / "stopped", decode).complete


def test_a_distillation_made_another_way_or_something_else_is_refused(teacher, sources, tmp_path):
    checkpoint, translator, decode = teacher

    def made(settings=decode, texts=sources, compute_type="float32") -> dict:
        return recipe([checkpoint], texts, settings, "mt", compute_type, CHUNK)

    distill(translator, made(), sources, tmp_path / "d", decode)
    wider = decode.replace(beam_size=3)
    with pytest.raises(MtError, match="other decode"):
        distill(translator, made(wider), sources, tmp_path / "d", wider)
    with pytest.raises(MtError, match="other compute type"):
        distill(translator, made(compute_type="bfloat16"), sources, tmp_path / "d", decode)
    with pytest.raises(MtError, match="other source files"):
        distill(translator, made(texts=sources[:1]), sources[:1], tmp_path / "d", decode)
    other = tmp_path / "other"
    other.mkdir()
    write_lines(other / "notes.txt", ["mine"])
    with pytest.raises(MtError, match="not a distillation"):
        distill(translator, made(), sources, other, decode)
    assert (other / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    (tmp_path / "d" / STATE_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(MtError, match="damaged"):
        distill(translator, made(), sources, tmp_path / "d", decode)


def test_the_command_writes_the_corpus_and_says_how_to_train_on_it(teacher, sources, tmp_path):
    checkpoint = teacher[0]
    args = ["distill", "--teacher", str(checkpoint), "-s", str(sources[0]), "-s", str(sources[1]), "-o", "corpus",
            "--beam", "2", "--max-len-a", "0", "--max-len-b", "8"]
    result = mt_in_process(*args, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert files(tmp_path / "corpus", teacher[1]) == files_of(teacher, sources, tmp_path)
    assert_one_line_error(mt("distill", "--teacher", str(checkpoint), "-s", "missing.zh", "-o", "x", cwd=tmp_path),
                          "missing.zh")
    assert_one_line_error(mt(*args[:-6], "--nbest", "2", "--beam", "2", cwd=tmp_path), "--nbest")


def files_of(teacher, sources, tmp_path) -> tuple[list[str], list[str]]:
    """The corpus of the command's settings, made through the function."""
    checkpoint, translator, decode = teacher
    made_by = recipe([checkpoint], sources, decode, "mt", "float32")
    distill(translator, made_by, sources, tmp_path / "reference", decode)
    return files(tmp_path / "reference", translator)


@pytest.mark.parametrize("student, layers", [("student-base", (3, 3)), ("student-tiny", (3, 1))])
def test_student_presets_train_on_the_distilled_corpus_in_a_run_of_their_own(student, layers):
    configs = Path(__file__).resolve().parents[1] / "configs"
    config = load_config([configs / "tatoeba-cpu.yaml", configs / f"{student}.yaml"])
    assert (config.model.num_encoder_layers, config.model.num_decoder_layers) == layers
    assert config.data.train.path == "runs/distilled/train" and config.train.run_dir == f"runs/{student}"
    assert config.data.test.path.endswith("tatoeba/test")  # judged against human references
