"""The commands as a user runs them: `python -m mt …` in a fresh directory, end to end on a tiny config."""

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from typer.testing import CliRunner

from conftest import SHARED, require_shared, tiny_yaml, write_lines
from doors import mt_cli
from mt.cli import GlobalOptions, app
from mt.core.errors import MtError


def mt(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mt", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=300)


@contextmanager
def mt_logging_kept():
    """The "mt" logger as it was after the block: a command sets up logging for a process of its own."""
    logger = logging.getLogger("mt")
    kept = logger.handlers, logger.level, logger.propagate
    try:
        yield
    finally:
        logger.handlers, logger.level, logger.propagate = kept


def mt_in_process(*args: str, cwd: Path):
    """The same command run inside this process (torch is loaded already: much faster than a new process)."""
    with mt_logging_kept(), pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        return CliRunner().invoke(app, list(args), obj=GlobalOptions())


def mt_here(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`mt ARGS` through the `mt` command's own entry point (mt.cli.run: its one-line errors and exit status), inside
    this process: torch is loaded already. A traceback fails the test (doors.mt_cli)."""
    with mt_logging_kept():
        outcome = mt_cli([str(arg) for arg in args], cwd)
    return subprocess.CompletedProcess(["mt", *args], outcome.status, outcome.stdout, outcome.stderr)


def assert_one_line_error(result: subprocess.CompletedProcess, *names: str, code: int = 2) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("mt: error: "), result.stderr
    for name in names:
        assert name in lines[0]


@pytest.fixture(scope="module")
def workdir(corpus_dir, tmp_path_factory) -> Path:
    """A directory where `mt train` has run on the tiny config (run directory runs/tiny)."""
    cwd = tmp_path_factory.mktemp("cli")
    (cwd / "tiny.yaml").write_text(tiny_yaml(corpus_dir, Path("runs/tiny"), max_steps=12, eval_every=6),
                                   encoding="utf-8")
    result = mt("train", "--config", "tiny.yaml", cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # training has no result to print: its reports are diagnostics, on stderr
    assert "train: cleaning kept 285 of 300 pairs (removed: numbers 2, questions 1, duplicates 12)" in result.stderr
    assert "train: 285 pairs, kept 285" in result.stderr and "done: 12 steps" in result.stderr
    assert " to go, at " in result.stderr  # the time left, estimated at the first log line
    return cwd


def test_train_writes_a_run_directory(workdir):
    run = workdir / "runs" / "tiny"
    assert (run / "config.yaml").is_file() and (run / "spm.model").is_file()
    assert (run / "checkpoints" / "best.pt").is_file() and (run / "checkpoints" / "last.pt").is_file()


def test_translate_arguments_stdin_and_files_keep_one_line_per_input(workdir):
    args = mt("translate", "我爱你", "你好。", cwd=workdir)  # default checkpoint: the latest run's best
    assert args.returncode == 0, args.stderr
    assert len(args.stdout.splitlines()) == 2
    piped = mt("translate", cwd=workdir, stdin="我爱你\n\n你好。\n")
    assert piped.returncode == 0, piped.stderr
    lines = piped.stdout.split("\n")[:-1]
    assert len(lines) == 3 and lines[1] == ""  # an empty input line gives an empty output line
    assert [lines[0], lines[2]] == args.stdout.splitlines()  # batching does not change a sentence's output
    write_lines(workdir / "in.zh", ["我爱你", "你好。"])
    to_file = mt("translate", "--input", "in.zh", "--output", "out.en", cwd=workdir)
    assert to_file.returncode == 0, to_file.stderr
    assert (workdir / "out.en").read_text(encoding="utf-8") == args.stdout


REPEATING = ["我爱你", "你好。", "我们明天去北京。", "他是我的朋友。"]  # a 12-step model's outputs repeat pieces


def test_nbest_beam_and_the_ctranslate2_engine(workdir):
    nbest = mt("translate", "--beam", "3", "--nbest", "2", "我爱你", "你好。", cwd=workdir)
    assert nbest.returncode == 0, nbest.stderr
    rows = [line.split(" ||| ") for line in nbest.stdout.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "1", "1"] and float(rows[0][2]) >= float(rows[1][2])
    pytest.importorskip("ctranslate2")
    exported = mt("export", "--ctranslate2", "ct2", cwd=workdir)
    assert exported.returncode == 0, exported.stderr
    ours = mt("translate", "--beam", "1", "我爱你", "你好。", cwd=workdir)
    theirs = mt("translate", "--engine", "ctranslate2", "--compute-type", "float32", "--checkpoint", "ct2",
                "--beam", "1", "我爱你", "你好。", cwd=workdir)
    assert theirs.returncode == 0, theirs.stderr
    assert theirs.stdout == ours.stdout
    outputs = {}
    for engine in ("ctranslate2", "mt"):  # the option reaches both searches and changes what they output
        for n in ("0", "1"):
            exported = ["--checkpoint", "ct2", "--compute-type", "float32"] if engine != "mt" else []
            done = mt_in_process("translate", "--engine", engine, *exported,
                                 "--beam", "1", "--no-repeat-ngram", n, *REPEATING, cwd=workdir)
            assert done.exit_code == 0, done.output
            outputs[engine, n] = done.stdout
    assert outputs["mt", "1"] != outputs["mt", "0"] and outputs["ctranslate2", "1"] == outputs["mt", "1"]
    assert outputs["ctranslate2", "0"] == outputs["mt", "0"]


def test_evaluate_the_configs_test_set_and_an_existing_output(workdir):
    result = mt("evaluate", "--output", "test.hyp", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("BLEU ") and "nrefs:1|case:mixed|eff:no|tok:13a" in result.stdout
    assert "chrF " in result.stdout
    assert len((workdir / "test.hyp").read_text(encoding="utf-8").splitlines()) == 20
    require_shared()
    wmt = SHARED / "wmt21"
    scored = mt("evaluate", "--hyp", str(wmt / "system-outputs/newstest2021.zh-en.hyp.NiuTrans.en"),
                "--ref", str(wmt / "newstest2021.zh-en.en"), cwd=workdir)
    assert scored.stdout.splitlines()[0].startswith("BLEU 31.886 ")
    assert scored.stdout.splitlines()[1].startswith("chrF 61.070 ")


def test_any_unicode_on_stdin_translates_and_long_lines_are_split_or_cut_with_a_warning(workdir):
    lines = ["😀🎉 emoji 🇨🇳", "\x07\x1b[31mred\x1b[0m\x00", "mixed 中文 English русский العربية", "我爱你。" * 2_500,
             "", "\u200b\ufeff", "我爱你" * 1_000]
    stdin = "".join(line + "\n" for line in lines)
    result = mt("translate", cwd=workdir, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == len(lines)
    assert "warning" not in result.stderr  # each sentence, and each part of one too long, fits the model
    whole = mt("translate", "--no-split", cwd=workdir, stdin=stdin)
    assert whole.stdout.count("\n") == len(lines) and "warning" not in whole.stderr  # cut at clauses, not lost
    nbest = mt("translate", "--nbest", "2", cwd=workdir, stdin=stdin)  # n-best lists are of whole lines
    assert "warning: input line 4 has" in nbest.stderr and "translating its first 1024" in nbest.stderr
    bad = subprocess.run([sys.executable, "-m", "mt", "translate"], cwd=workdir, input=b"ok\n\xff\xfe\n",
                         capture_output=True, timeout=300)
    assert bad.returncode == 2 and b"stdin:2: invalid UTF-8" in bad.stderr


def test_paragraphs_html_and_documents_come_back_in_their_shape(workdir, tmp_path):
    import xml.etree.ElementTree as ET

    paragraphs = mt_in_process("translate", "我爱你。你呢？\n\n  他走了。", "--no-split", cwd=workdir)
    assert paragraphs.exit_code == 0 and paragraphs.stdout.count("\n") == 3  # lines kept, each line whole
    split = mt_in_process("translate", "我爱你。你呢？\n\n  他走了。", cwd=workdir)
    assert split.exit_code == 0 and split.stdout.count("\n") == 3 and split.stdout.split("\n")[2].startswith("  ")
    html = '<p>我爱<b>汤姆</b>。<a href="/x?a=1&amp;b=2">你</a>呢？</p><script>var s = "中文";</script>'
    result = mt_in_process("translate", "--format", "html", html, cwd=workdir)
    assert result.exit_code == 0, result.output
    out, script = result.stdout, '<script>var s = "中文";</script>'
    for kept in ("<p>", "<b>", "</b>", '<a href="/x?a=1&amp;b=2">', "</a>", "</p>", script):
        assert out.count(kept) == 1, out
    ET.fromstring("<root>" + out.replace(script, "") + "</root>")  # well-formed
    subtitles = tmp_path / "film.srt"
    subtitles.write_text("1\n00:00:01,000 --> 00:00:02,500\n我爱你。\n你呢？\n\n2\n00:00:03,000 --> 00:00:04,000\n"
                         "他走了。\n", encoding="utf-8")
    result = mt_in_process("translate", "--input", str(subtitles), "--output", str(tmp_path / "film.en.srt"),
                           cwd=workdir)
    assert result.exit_code == 0, result.output
    translated = (tmp_path / "film.en.srt").read_text(encoding="utf-8")
    assert "00:00:01,000 --> 00:00:02,500" in translated and "00:00:03,000 --> 00:00:04,000" in translated
    assert "我" not in translated and translated.startswith("1\n")


def test_prepare_trains_the_tokenizer_and_fills_the_token_cache_that_training_reuses(corpus_dir, tmp_path):
    (tmp_path / "tiny.yaml").write_text(tiny_yaml(corpus_dir, Path("runs/tok")), encoding="utf-8")
    result = mt("prepare", "-c", "tiny.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "runs" / "tok" / "spm.model").is_file() and "600 pieces (joint)" in result.stderr
    cache = sorted((tmp_path / "runs" / "tok" / "cache").glob("*.arrow"))
    assert [p.name.split("-")[0] for p in cache] == ["dev", "train"]
    stamps = [p.stat().st_mtime_ns for p in cache]
    again = mt("train", "-c", "tiny.yaml", "--set", "train.max_steps=1", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "tokenizer: trained" not in again.stderr
    assert [p.stat().st_mtime_ns for p in sorted((tmp_path / "runs" / "tok" / "cache").glob("*.arrow"))] == stamps


def test_prepare_mixes_extra_training_corpora(corpus_dir, tmp_path):
    (tmp_path / "tiny.yaml").write_text(tiny_yaml(corpus_dir, Path("runs/mix")), encoding="utf-8")
    mix = f"data.extra_train=[{{path: {corpus_dir / 'dev'}, repeat: 2}}]"
    guarded = mt("prepare", "-c", "tiny.yaml", "--set", mix, cwd=tmp_path)  # the dev set is no training corpus
    assert guarded.returncode == 2 and "Traceback" not in guarded.stderr
    assert guarded.stderr.splitlines()[-1].startswith(
        "mt: error: extra_train[0]: cleaning removed every one of its 20 pairs (most by contamination): is it a dev")
    result = mt("prepare", "-c", "tiny.yaml", "--set", mix, "--set", "data.train.max_pairs=50",
                "--set", "data.contamination=keep", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "extra_train[0]: 20 training pairs hold a dev or test sentence and are kept" in result.stderr
    assert "training mixture: 90 pairs per epoch (train 50×1, extra_train[0] 20×2)" in result.stderr
    cache = sorted((tmp_path / "runs" / "mix" / "cache").glob("*.arrow"))
    assert [p.name.split("-")[0] for p in cache] == ["dev", "train", "train1"]
    missing = f"data.extra_train=[{{path: {tmp_path / 'nothere'}}}]"
    assert_one_line_error(mt("prepare", "-c", "tiny.yaml", "--set", missing, cwd=tmp_path), "nothere.zh: no such file")


def test_bad_input_gives_one_clear_line(workdir, tmp_path):
    """Two as separate processes, the rest through the same entry point in this process."""
    assert_one_line_error(mt("train", "-c", "missing.yaml", cwd=workdir), "missing.yaml")
    assert_one_line_error(mt("train", "-c", "tiny.yaml", "--set", "model.d_modle=8", cwd=workdir),
                          "model.d_modle")
    assert_one_line_error(mt_here("train", "-c", "tiny.yaml", "--set", "train.max_steps=many", cwd=workdir),
                          "train.max_steps")
    write_lines(tmp_path / "bad.zh", ["一", "二"])
    write_lines(tmp_path / "bad.en", ["one"])
    assert_one_line_error(mt_here("train", "-c", "tiny.yaml", "--run-dir", str(tmp_path / "r"),
                                  "--set", f"data.train.path={tmp_path / 'bad'}", cwd=workdir), "bad.zh", "bad.en")
    assert_one_line_error(mt_here("translate", "--checkpoint", "nothere.pt", "hi", cwd=workdir), "nothere.pt")
    assert_one_line_error(mt_here("translate", "--input", "nothere.zh", cwd=workdir), "nothere.zh")
    if not torch.cuda.is_available():
        assert_one_line_error(mt_here("translate", "--device", "cuda", "hi", cwd=workdir), "--device cuda")
    assert_one_line_error(mt_here("translate", "--output", "no/such/dir/out.en", "hi", cwd=workdir),
                          "no/such/dir")
    assert_one_line_error(mt_here("translate", "hi", cwd=tmp_path), "no trained run")
    assert_one_line_error(mt_here("translate", "--beam", "0", "hi", cwd=workdir), "--beam")
    assert_one_line_error(mt_here("train", cwd=workdir), "--config")
    (tmp_path / "notyaml.yaml").write_text("model: [unclosed\n", encoding="utf-8")
    assert_one_line_error(mt_here("train", "-c", str(tmp_path / "notyaml.yaml"), cwd=workdir), "not valid YAML")
    assert_one_line_error(mt_here("translate", "--nbest", "5", "--beam", "2", "hi", cwd=workdir), "--nbest 5")
    assert_one_line_error(mt_here("translate", "--engine", "ctranslate2", "--checkpoint", "tiny.yaml", "hi",
                                  cwd=workdir), "not a CTranslate2 export")


def test_python_dash_m_and_help(tmp_path):
    result = mt("--help", cwd=tmp_path)
    assert result.returncode == 0 and "translate" in result.stdout and "evaluate" in result.stdout


def test_reports_go_to_stderr_and_quiet_leaves_only_warnings_and_errors(workdir, tmp_path):
    averaged = mt("average", "runs/tiny", "--last", "2", "-o", str(tmp_path / "avg.pt"), cwd=workdir)
    assert averaged.stdout == "" and "averaged step-00000006.pt, step-00000012.pt" in averaged.stderr
    quiet = mt("--quiet", "average", "runs/tiny", "--last", "2", "-o", str(tmp_path / "avg.pt"), cwd=workdir)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == "", quiet.stderr


def test_a_damaged_token_cache_is_rebuilt_and_a_damaged_tokenizer_is_refused(workdir, tmp_path):
    import sentencepiece as spm

    run = tmp_path / "runs" / "tiny"
    shutil.copytree(workdir / "runs" / "tiny", run)
    shutil.copy(workdir / "tiny.yaml", tmp_path)
    cache = next((run / "cache").glob("train-*.arrow"))
    size = cache.stat().st_size
    os.truncate(cache, size // 3)  # a disk error, a copy cut short
    resumed = mt("train", "-c", "tiny.yaml", "--resume", "--set", "train.max_steps=14", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    warnings = [line for line in resumed.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and cache.name in warnings[0] and "rebuilding it from the corpus" in warnings[0]
    assert cache.stat().st_size == size

    checkpoint = tmp_path / "model.pt"
    shutil.move(run / "checkpoints" / "last.pt", checkpoint)
    shutil.rmtree(run / "checkpoints")  # a run that was only prepared, whose tokenizer is then damaged:
    proto = (run / "spm.model").read_bytes()
    cut = next(n for n in range(100, len(proto)) if loads(spm, proto[:n]))  # cut where SentencePiece still loads it
    (run / "spm.model").write_bytes(proto[:cut])
    assert_one_line_error(mt("train", "-c", "tiny.yaml", cwd=tmp_path), "spm.model", "but tokenizer.vocab_size is 600",
                          "damaged")
    (run / "spm.model").write_bytes(proto[:len(proto) // 2])
    assert_one_line_error(mt("prepare", "-c", "tiny.yaml", cwd=tmp_path), "spm.model: not a SentencePiece model")
    translated = mt("translate", "--checkpoint", str(checkpoint), "我爱你", cwd=tmp_path)  # its own copy
    assert translated.returncode == 0 and translated.stdout.count("\n") == 1, translated.stderr


def loads(spm, proto: bytes) -> bool:
    try:
        spm.SentencePieceProcessor(model_proto=proto)
        return True
    except RuntimeError:
        return False


def test_an_output_never_takes_the_place_of_something_of_another_kind(workdir, tmp_path):
    notes, checkpoint = tmp_path / "notes.txt", workdir / "runs" / "tiny" / "checkpoints" / "last.pt"
    notes.write_text("mine\n", encoding="utf-8")
    before = checkpoint.read_bytes()
    refused = [(["plot", "runs/tiny", "-o", notes], "is a file, not a PNG image"),
               (["translate", "-o", tmp_path, "我爱你"], "is a directory, not a text file"),
               (["translate", "--attention", notes, "我爱你"], "is a file, not a PNG image"),
               (["evaluate", "-o", checkpoint], "is a file, not a text file"),
               (["average", "runs/tiny", "--last", "1", "-o", notes], "is a file, not a checkpoint"),
               (["export", "--huggingface", notes], "is a file, not a Hugging Face export of mt"),
               (["export", "--ctranslate2", tmp_path], "is a directory, not a CTranslate2 export of mt")]
    for args, words in refused:
        done = mt_in_process(*map(str, args), cwd=workdir)
        assert isinstance(done.exception, MtError) and words in str(done.exception), (args, done.output)
    assert notes.read_text(encoding="utf-8") == "mine\n" and checkpoint.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    translated = mt_in_process("translate", "-o", str(notes), "我爱你", cwd=workdir)  # a translation over a text
    assert translated.exit_code == 0 and notes.read_text(encoding="utf-8") != "mine\n", translated.output


def test_an_output_never_replaces_an_input_nor_takes_another_formats_name(workdir, tmp_path):
    source, link, reference = tmp_path / "film.srt", tmp_path / "link.srt", tmp_path / "ref.en"
    source.write_text("1\n00:00:01,000 --> 00:00:02,000\n我爱你。\n\n", encoding="utf-8")
    os.link(source, link)  # the same file under another name
    write_lines(reference, ["I love you."] * 4)
    before = source.read_bytes(), reference.read_bytes()
    also_input = "it is also this command's input, which its output would replace"
    refused = [(["translate", "--input", source, "-o", source], also_input),
               (["translate", "--input", source, "-o", link], also_input),
               (["evaluate", "--src", source, "--ref", reference, "-o", reference], also_input),
               (["score", "--src", source, "--tgt", reference, "-o", source], also_input),
               (["translate", "--input", source, "-o", tmp_path / "film.docx"],
                "its suffix names a Word document, but the translation is subtitles; choose a name ending in .txt, "
                ".srt, or a suffix that names no format"),
               (["translate", "--input", tmp_path / "x.docx", "-o", tmp_path / "x.txt"],
                "the translation is a Word document"),
               (["translate", "--format", "html", "-o", tmp_path / "page.srt", "<p>我爱你</p>"],
                "the translation is HTML")]
    for args, words in refused:
        done = mt_in_process(*map(str, args), cwd=workdir)
        assert isinstance(done.exception, MtError) and words in str(done.exception), (args, done.output)
    assert (source.read_bytes(), reference.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["film.srt", "link.srt", "ref.en"]
    kept = mt_in_process("translate", "--input", str(source), "-o", str(tmp_path / "film.en.txt"), cwd=workdir)
    assert kept.exit_code == 0, kept.output  # subtitles' text may go to a .txt file
    assert "00:00:01,000 --> 00:00:02,000" in (tmp_path / "film.en.txt").read_text(encoding="utf-8")


def test_a_text_files_translation_keeps_its_byte_order_mark_and_line_ends(workdir, tmp_path):
    lines = ["我爱你。", "", "他走了。你好。"]
    (tmp_path / "plain.zh").write_bytes("\n".join(lines).encode("utf-8") + b"\n")
    (tmp_path / "windows.zh").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8") + b"\r\n")
    for name in ("plain", "windows"):
        done = mt_in_process("translate", "-i", str(tmp_path / f"{name}.zh"), "-o", str(tmp_path / f"{name}.en"),
                             cwd=workdir)
        assert done.exit_code == 0, done.output
    plain, windows = (tmp_path / "plain.en").read_bytes(), (tmp_path / "windows.en").read_bytes()
    assert plain.count(b"\n") == 3 and b"\r" not in plain and not plain.startswith(b"\xef\xbb\xbf")
    assert windows == b"\xef\xbb\xbf" + plain.replace(b"\n", b"\r\n")  # the mark is not translated as a word


def test_ensembles_translate_and_evaluate_and_refuse_what_does_not_fit(workdir, tmp_path):
    best = "runs/tiny/checkpoints/best.pt"
    step = "runs/tiny/checkpoints/step-00000006.pt"
    alone = mt_in_process("translate", "--checkpoint", best, "--beam", "3", "我爱你。", "他走了。", cwd=workdir)
    twice = mt_in_process("translate", "--checkpoint", best, "--checkpoint", best, "--beam", "3", "我爱你。", "他走了。",
                          cwd=workdir)
    assert alone.exit_code == twice.exit_code == 0 and twice.stdout == alone.stdout  # a model with itself: the model
    scored = mt_in_process("evaluate", "--checkpoint", best, "--checkpoint", step, "--weights", "3", "--weights", "1",
                           cwd=workdir)
    assert scored.exit_code == 0 and scored.stdout.startswith("BLEU"), scored.output
    other = tmp_path / "other.yaml"  # the same data with another vocabulary
    other.write_text((workdir / "tiny.yaml").read_text(encoding="utf-8").replace("vocab_size: 600", "vocab_size: 500")
                     .replace("runs/tiny", str(tmp_path / "other")), encoding="utf-8")
    assert mt("train", "-c", str(other), cwd=workdir).returncode == 0
    foreign = str(tmp_path / "other" / "checkpoints" / "last.pt")
    refused = [(["translate", "--checkpoint", best, "--checkpoint", foreign, "hi"], "an ensemble's models share one"),
               (["translate", "--checkpoint", best, "--checkpoint", step, "--weights", "1", "hi"], "1 given for 2"),
               (["translate", "--checkpoint", best, "--weights", "2", "hi"], "give several --checkpoint"),
               (["translate", "--checkpoint", "a", "--checkpoint", "b", "--engine", "ctranslate2", "hi"],
                "CTranslate2 has no ensembles")]
    for args, words in refused:
        done = mt_in_process(*args, cwd=workdir)
        assert isinstance(done.exception, MtError) and words in str(done.exception), (args, done.output)


def test_the_checkpoints_decode_settings_are_the_defaults_nbest_included(workdir, tmp_path):
    """Every decode option defaults to the checkpoint's decode section: a model saved with nbest 2 prints its two
    best translations unless --nbest says otherwise."""
    state = torch.load(workdir / "runs/tiny/checkpoints/best.pt", weights_only=True)  # the file's own data
    state["config"]["decode"].update(beam_size=3, nbest=2)
    torch.save(state, tmp_path / "nbest.pt")
    two = mt_in_process("translate", "--checkpoint", str(tmp_path / "nbest.pt"), "我爱你", cwd=workdir)
    assert two.exit_code == 0, two.output
    assert [line.split(" ||| ")[0] for line in two.stdout.splitlines()] == ["0", "0"]
    one = mt_in_process("translate", "--checkpoint", str(tmp_path / "nbest.pt"), "--nbest", "1", "我爱你", cwd=workdir)
    assert one.exit_code == 0 and len(one.stdout.splitlines()) == 1 and " ||| " not in one.stdout
    greedy = mt_in_process("translate", "--checkpoint", str(tmp_path / "nbest.pt"), "--beam", "1", "我爱你", cwd=workdir)
    assert greedy.exit_code == 0 and len(greedy.stdout.splitlines()) == 1, greedy.output  # a beam of 1 has 1 best
    wide = mt_in_process("serve", "--checkpoint", str(tmp_path / "nbest.pt"), "--beam", "20", cwd=workdir)
    assert isinstance(wide.exception, MtError) and "over --max-beam 16" in str(wide.exception)


def test_every_decode_and_serve_key_is_an_option_with_its_help():
    """The options are made from the sections' declarations, so none is missing or spelt twice."""
    import dataclasses

    from mt.config import DecodeConfig
    from mt.core.schema import flag_of, help_of
    from mt.serve.limits import ServeConfig

    runner = CliRunner()
    for command, sections in (("translate", [DecodeConfig]), ("evaluate", [DecodeConfig]),
                              ("serve", [DecodeConfig, ServeConfig])):
        shown = runner.invoke(app, [command, "--help"], obj=GlobalOptions(), terminal_width=200).stdout
        shown = " ".join(shown.replace("│", " ").split())  # the help's lines, out of rich's box
        for f in (f for section in sections for f in dataclasses.fields(section)):
            assert flag_of(f) in shown and " ".join(help_of(f).split()[:4]) in shown, (command, f.name)


def test_resume_and_init_from_refuse_a_checkpoint_whose_tokenizer_is_not_its_vocabulary(workdir, tmp_path):
    run = tmp_path / "damaged"
    shutil.copytree(workdir / "runs" / "tiny", run)
    last = run / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    state["tokenizer"]["vocab_hash"] = "0" * 16  # what a tokenizer swapped for another one looks like
    last.unlink()  # a hard link to a step checkpoint: write a file of its own
    torch.save(state, last)
    for args in (["--resume", "--run-dir", str(run)], ["--init-from", str(last), "--run-dir", str(tmp_path / "new")]):
        done = mt("train", "-c", "tiny.yaml", *args, cwd=workdir)
        assert_one_line_error(done, str(last), "does not match its vocabulary hash")


def test_translate_with_a_glossary_holds_each_term_and_reports_it(workdir, tmp_path):
    """Each line's terms are in its translation; a line without a term is translated as without the glossary; the
    report has a record per input line."""
    (tmp_path / "g.tsv").write_text("# name\tits translation\n我\tTom\n你好\tgood day\n", encoding="utf-8")
    lines = ["我爱你。", "你好。", "他走了。"]
    plain = mt_in_process("translate", "--beam", "2", *lines, cwd=workdir)
    held = mt_in_process("translate", "--beam", "2", "--glossary", str(tmp_path / "g.tsv"), "--glossary-report",
                         str(tmp_path / "report.jsonl"), *lines, cwd=workdir)
    assert plain.exit_code == 0 and held.exit_code == 0, held.output
    first, second, third = held.stdout.splitlines()
    assert re.search(r"\bTom\b", first) and "good day" in second and third == plain.stdout.splitlines()[2]
    report = [json.loads(line) for line in (tmp_path / "report.jsonl").read_text(encoding="utf-8").splitlines()]
    assert report == [{"line": 1, "terms": [{"source": "我", "target": "Tom", "used": True}]},
                      {"line": 2, "terms": [{"source": "你好", "target": "good day", "used": True}]},
                      {"line": 3, "terms": []}]
    nbest = mt_in_process("translate", "--beam", "3", "--nbest", "2", "--glossary", str(tmp_path / "g.tsv"), "我爱你。",
                          cwd=workdir)
    assert [json.loads(line.split(" ||| ")[4])[0]["used"] for line in nbest.stdout.splitlines()] == [True, True]


def test_evaluate_with_a_glossary_scores_the_outputs_that_hold_its_terms_and_counts_them(workdir, tmp_path):
    (tmp_path / "src.zh").write_text("我爱你。\n他走了。\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text("Tom loves you.\nHe left.\n", encoding="utf-8")
    (tmp_path / "g.tsv").write_text("我\tTom\n", encoding="utf-8")
    files = ["--src", str(tmp_path / "src.zh"), "--ref", str(tmp_path / "ref.en"), "--beam", "2"]
    done = mt_in_process("evaluate", *files, "--glossary", str(tmp_path / "g.tsv"), "-o", str(tmp_path / "hyp"),
                         cwd=workdir)
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == "glossary: 1 of 1 terms used (100.0%)"
    held = (tmp_path / "hyp").read_text(encoding="utf-8").splitlines()
    assert re.search(r"\bTom\b", held[0])
    assert held[1] == mt_in_process("translate", "--beam", "2", "他走了。", cwd=workdir).stdout.strip()


def test_html_takes_a_glossary_in_either_mode(workdir, tmp_path):
    (tmp_path / "g.tsv").write_text("我\tTom\n", encoding="utf-8")
    for mode in ("hard", "soft"):
        done = mt_in_process("translate", "--glossary", str(tmp_path / "g.tsv"), "--glossary-mode", mode, "--format",
                             "html", "<p>我爱你。</p>", cwd=workdir)
        assert done.exit_code == 0, done.output
        assert re.fullmatch(r"<p>.*\bTom\b.*</p>\n?", done.stdout), done.stdout
        assert "glossary: 1 of 1 terms used" in done.stderr


def test_a_glossary_with_what_it_cannot_go_with_is_one_line(workdir, tmp_path):
    (tmp_path / "g.tsv").write_text("我\tTom\n", encoding="utf-8")
    (tmp_path / "bad.tsv").write_text("我 Tom\n", encoding="utf-8")
    for args, words in ((["--glossary", str(tmp_path / "bad.tsv")], "bad.tsv:1: no tab"),
                        (["--glossary", str(tmp_path / "g.tsv"), "--engine", "ctranslate2"],
                         "needs --engine mt: CTranslate2 has no constrained search; --glossary-mode soft works with "
                         "either engine"),
                        (["--glossary", str(tmp_path / "g.tsv"), "--glossary-report", "r.jsonl", "--format", "html"],
                         "--glossary-report lists each line's terms: plain text only"),
                        (["--glossary-report", str(tmp_path / "r.jsonl")], "goes with --glossary")):
        assert_one_line_error(mt("translate", *args, "我爱你。", cwd=workdir), words)
