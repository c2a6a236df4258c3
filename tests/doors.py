"""Every door through which `mt` reads bytes that a user or a network hands it, with a Hypothesis strategy of
damaged inputs for each and the property they must keep: the command succeeds, or exits with one line
("mt: error: …") and a non-zero status; never a traceback, never a hang past its bound, never a write outside
its output. tests/test_fuzz.py runs a fixed number of examples per door; scripts/fuzz.py runs any door longer and
saves each failing input under tests/fuzz_cases/DOOR/, which the suite then replays.

The CLI runs in this process (mt.cli.run, the same code as the `mt` command), so that an example costs
milliseconds rather than a Python start; the config doors call the loader the CLI calls, since a config that
loads goes on to train.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import json
import os
import shutil
import signal
import sys
import traceback
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from hypothesis import strategies as st

from conftest import running, tiny_yaml, write_corpus

BOUND_SECONDS = 30  # an example running longer than this hangs


class Failure(AssertionError):
    """An input broke the property; the message says how (the traceback, the lines printed, the files written)."""


@dataclass
class World:
    """What the doors damage copies of: a tiny trained run, its exports and the files they hold."""

    root: Path
    config: Path  # tiny.yaml
    run: Path
    checkpoint: Path
    ct2: Path
    hf: Path
    shortlist: Path
    closing: contextlib.ExitStack
    url: str = ""  # the server's, once the HTTP door has started it

    def server(self) -> str:
        """`mt serve`'s app on a loopback port, in a thread of this process, with small limits."""
        if not self.url:
            from mt.serve.limits import ServeConfig
            from mt.decode.translator import load_translator
            from mt.serve.app import create_app

            limits = ServeConfig(char_limit=200, batch_limit=8, body_limit=20_000, body_timeout=1.0)
            app = create_app(load_translator(self.checkpoint, "cpu"), "mt", limits)
            self.url = self.closing.enter_context(running(app))
        return self.url


def build_world(root: Path) -> World:
    """Train a tiny model on 300 Tatoeba pairs for 4 steps and export it both ways (seconds)."""
    from mt.train.loop import train
    from mt.config import load_config

    corpus = write_corpus(root / "corpus")
    config = root / "tiny.yaml"
    config.write_text(tiny_yaml(corpus, root / "run", max_steps=4, eval_every=4), encoding="utf-8")
    run = train(load_config([config]))
    checkpoint = run / "checkpoints" / "last.pt"
    world = World(root, config, run, checkpoint, root / "ct2", root / "hf", root / "shortlist.pt",
                  contextlib.ExitStack())
    for command in (["export", "--ctranslate2", str(world.ct2)], ["export", "--huggingface", str(world.hf)],
                    ["shortlist", "-o", str(world.shortlist)]):
        outcome = mt_cli([*command, "--checkpoint", str(checkpoint)], root)
        assert outcome.status == 0, outcome.stderr
    return world


# --- running a command in this process -------------------------------------------------------------------------

@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str


class Hang(BaseException):  # not an Exception: nothing in mt may catch it
    pass


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    def alarm(*_):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def mt_cli(args: list[str], cwd: Path, stdin: bytes = b"") -> Outcome:
    """`mt ARGS` in `cwd` with `stdin`, as the command would run; a traceback or a hang is a Failure."""
    from mt.cli import run

    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    os.chdir(cwd)
    try:
        status = guarded(lambda: run(args), f"mt {' '.join(args)}")
    finally:
        os.chdir(here)
        sys.stdin, sys.stdout, sys.stderr = saved
    return Outcome(status, out.getvalue(), err.getvalue())


def guarded(call: Callable[[], object], what: str):
    """`call()` within BOUND_SECONDS; a hang or an exception (other than a Failure) is a Failure."""
    try:
        with bounded(BOUND_SECONDS):
            return call()
    except Failure:
        raise
    except Hang:
        raise Failure(f"{what}: still running after {BOUND_SECONDS} s")
    except BaseException:
        raise Failure(f"{what}: a traceback\n{traceback.format_exc()}")


def one_line_or_success(outcome: Outcome, what: str) -> Outcome:
    """The property of every command: success, or one "mt: error:" line and a non-zero status."""
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("mt: error:")]
    if outcome.status == 0 and not errors:
        return outcome
    if outcome.status == 0 or len(errors) != 1 or "Traceback" in outcome.stderr:
        raise Failure(f"{what}: status {outcome.status}, stderr:\n{outcome.stderr}")
    return outcome


def files_under(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@contextlib.contextmanager
def writes_only(root: Path, allowed: Callable[[str], bool]) -> Iterator[None]:
    """Fail when the block creates, changes or removes a file under `root` that `allowed` does not name."""
    before = files_under(root)
    yield
    after = files_under(root)
    changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    if stray := sorted(name for name in changed if not allowed(name)):
        raise Failure(f"wrote outside its output: {stray[:5]}")


def workdir(world: World) -> Path:
    """A fresh directory for one example's files; its previous content is removed."""
    path = world.root / "work"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    return path


# --- strategies of damage ----------------------------------------------------------------------------------------
# A damaged file is a recipe applied to a real file of the world (["flip", [[offset, bit], …]], ["cut", n], …), so
# that a saved case stays small and damages the same structure in a world built on another machine, whose weights
# differ but whose layout does not.

def recipes(base: bytes) -> st.SearchStrategy[list]:
    """Random bytes; `base` cut at every length class (a few bytes, the header, the middle, one byte short); bits
    flipped; a run overwritten (a damaged disk block, a partial write)."""
    size = max(len(base), 1)
    cuts = st.one_of(st.integers(0, 64), st.integers(0, size - 1), st.integers(max(size - 64, 0), size - 1))
    return st.one_of(st.binary(max_size=2048).map(lambda data: ["bytes", data]), cuts.map(lambda n: ["cut", n]),
                     st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 7)), min_size=1, max_size=8)
                     .map(lambda flips: ["flip", flips]),
                     st.tuples(st.integers(0, size - 1), st.binary(min_size=1, max_size=256))
                     .map(lambda run: ["overwrite", *run]))


def zip_recipes(base: bytes) -> st.SearchStrategy[list]:
    """A valid zip whose members are wrong: one dropped, one's bytes replaced, one renamed, or one added."""
    with zipfile.ZipFile(io.BytesIO(base)) as z:
        names = sorted(z.namelist())
    return st.tuples(st.sampled_from(["drop", "replace", "rename", "add"]), st.sampled_from(names),
                     st.binary(max_size=512)).map(lambda change: ["zip", *change])


def damaged(recipe: list, base: bytes) -> bytes:
    how, *args = recipe
    if how == "bytes":
        return args[0]
    if how == "cut":
        return base[:args[0]]
    if how == "flip":
        data = bytearray(base)
        for at, bit in args[0]:
            data[at % len(data)] ^= 1 << bit
        return bytes(data)
    if how == "overwrite":
        at, run = args
        return base[:at] + run + base[at + len(run):]
    return rezipped(base, *args)


def rezipped(base: bytes, how: str, name: str, junk: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(base)) as z:
        members = {member: z.read(member) for member in z.namelist()}
    if name not in members:  # a case saved against another world
        name = sorted(members)[0]
    if how == "drop":
        del members[name]
    elif how == "replace":
        members[name] = junk
    elif how == "rename":
        members[name + "x"] = members.pop(name)
    else:
        members[f"{name.split('/')[0]}/extra"] = junk
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for member, content in members.items():
            z.writestr(member, content)
    return out.getvalue()


def encode(example) -> bytes:
    """A saved case: the example as JSON, its bytes in base64."""
    return json.dumps(example, default=lambda data: {"base64": base64.b64encode(data).decode()}).encode()


def decode(saved: bytes):
    return json.loads(saved, object_hook=lambda d: base64.b64decode(d["base64"]) if set(d) == {"base64"} else d)


# Text as users' files hold it: NUL, line and paragraph separators that are no line end to mt, lone surrogates
# (invalid UTF-8 once written), other encodings, CR line ends, nothing at all.
ODD_CHARACTERS = ["\x00", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\r", "\ufeff", "\ud800", "\udfff", "é", "我"]


def odd_text() -> st.SearchStrategy[list]:
    words = st.one_of(st.sampled_from(["我爱你。", "你好", "Hello.", "<b>", " ", "\n", "\n\n"]),
                      st.sampled_from(ODD_CHARACTERS), st.text(max_size=8))
    text = st.lists(words, max_size=20).map("".join)
    encoded = st.tuples(text, st.sampled_from(["utf-8", "surrogatepass", "gb18030", "utf-16", "latin-1"])).map(
        lambda t: t[0].encode("utf-8", "surrogatepass") if t[1] == "surrogatepass"
        else t[0].encode(t[1], "replace"))
    return st.one_of(encoded, st.binary(max_size=300)).map(lambda data: ["bytes", data])


# --- the doors -----------------------------------------------------------------------------------------------------

@dataclass
class Door:
    """A place where mt reads outside bytes: how to make inputs for it (JSON-able, with bytes), and how to check
    one (raises Failure)."""

    name: str
    strategy: Callable[[World], st.SearchStrategy]
    check: Callable[[World, object], None]


@functools.cache
def read(path: Path) -> bytes:
    return path.read_bytes()


def check_checkpoint(world: World, recipe: list) -> None:
    """A damaged checkpoint: every command that reads one gives one line, and never calls it code."""
    work = workdir(world)
    (work / "model.pt").write_bytes(damaged(recipe, read(world.checkpoint)))
    with writes_only(world.root, lambda name: name.startswith("work/")):
        for args in (["info", "model.pt"], ["translate", "--checkpoint", "model.pt", "我爱你。"]):
            outcome = one_line_or_success(mt_cli(args, work), f"mt {args[0]}")
            if "could run code" in outcome.stderr:
                raise Failure(f"a damaged file was refused as code: {outcome.stderr}")
    if [p.name for p in work.iterdir()] != ["model.pt"]:
        raise Failure(f"mt translate left files: {sorted(p.name for p in work.iterdir())}")


def check_shortlist(world: World, recipe: list) -> None:
    """A damaged shortlist (mt shortlist's file): mt translate with it gives one line, or translates."""
    work = workdir(world)
    (work / "list.pt").write_bytes(damaged(recipe, read(world.shortlist)))
    with writes_only(world.root, lambda name: name.startswith("work/")):
        one_line_or_success(mt_cli(["translate", "--checkpoint", str(world.checkpoint), "--shortlist", "list.pt",
                                    "我爱你。"], work), "mt translate")


# Callables a pickle can name: each is refused, and none is called.
CODE = ["os.system", "builtins.eval", "builtins.exec", "subprocess.Popen", "shutil.rmtree", "builtins.getattr",
        "posix.system", "webbrowser.open", "runpy._run_code", "torch.load"]


def code_pickle(world: World) -> st.SearchStrategy[list]:
    """Checkpoints made by torch.save whose data would call one of CODE, at the top or nested among weights."""
    return st.tuples(st.sampled_from(CODE), st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.booleans()).map(list)


def calling_code(world: World, name: str, argument: str, nested: bool) -> bytes:
    import importlib

    import torch

    module, attribute = name.rsplit(".", 1)
    target = getattr(importlib.import_module(module), attribute)

    class Call:
        def __reduce__(self):
            return target, (f"touch {argument}",)

    state = torch.load(world.checkpoint, weights_only=True)
    if nested:
        state["model"] = {**state["model"], "payload": [Call()]}
    else:
        state["payload"] = Call()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def check_code(world: World, example: list) -> None:
    work = workdir(world)
    (work / "model.pt").write_bytes(calling_code(world, *example))
    with writes_only(world.root, lambda name: name == "work/model.pt"):
        outcome = one_line_or_success(mt_cli(["info", "model.pt"], work), "mt info")
    if outcome.status == 0 or "refused, it could run code" not in outcome.stderr:
        raise Failure(f"a checkpoint that calls code was not refused as such: {outcome.stderr}")


def check_tokenizer(world: World, recipe: list) -> None:
    """A damaged SentencePiece model in a run directory (mt prepare) and inside a checkpoint (mt translate)."""
    import torch

    proto = damaged(recipe, read(world.run / "spm.model"))
    work = workdir(world)
    (work / "run").mkdir()
    (work / "run" / "spm.model").write_bytes(proto)
    state = torch.load(world.checkpoint, weights_only=True)
    state["tokenizer"]["src"] = proto
    torch.save(state, work / "model.pt")
    with writes_only(world.root, lambda name: name.startswith("work/")):
        one_line_or_success(mt_cli(["prepare", "-c", str(world.config), "--run-dir", "run"], work), "mt prepare")
        one_line_or_success(mt_cli(["translate", "--checkpoint", "model.pt", "我爱你。"], work), "mt translate")


def check_config(world: World, recipe: list) -> None:
    """A config file as the CLI loads it (mt train, prepare, clean): a Config or one line."""
    from mt.config import load_config

    work = workdir(world)
    (work / "config.yaml").write_bytes(damaged(recipe, read(world.config)))
    loaded(lambda: load_config([work / "config.yaml"]), "config.yaml")


def check_sets(world: World, sets: list[str]) -> None:
    """--set KEY=VALUE strings over a valid config."""
    from mt.config import load_config

    loaded(lambda: load_config([world.config], sets), f"--set {sets}")


def loaded(load: Callable[[], object], what: str) -> None:
    """`load` returns, or raises a one-line MtError."""
    from mt.core.errors import MtError

    def attempt() -> None:
        try:
            load()
        except MtError as e:
            if "\n" in str(e):
                raise Failure(f"{what}: an error of several lines: {e}")

    guarded(attempt, what)


CONFIG_KEYS = {"model": ["d_model", "num_heads", "d_ff", "dropout", "norm", "max_positions"],
               "tokenizer": ["vocab_size", "joint", "byte_fallback"],
               "data": ["train", "dev", "test", "max_len", "filters", "contamination", "chinese_script"],
               "train": ["max_steps", "max_tokens", "lr_scale", "seed", "precision", "max_minutes"],
               "decode": ["beam_size", "max_len_a", "length_penalty", "split_sentences"], "serve": ["char_limit"]}


def yaml_documents(world: World) -> st.SearchStrategy[list]:
    """Random YAML documents shaped like configs (real sections and keys, random values), the real config with
    characters changed, and random text."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10))
    values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                          max_leaves=6)
    section = st.sampled_from(sorted(CONFIG_KEYS)).flatmap(
        lambda name: st.tuples(st.just(name), st.dictionaries(st.sampled_from(CONFIG_KEYS[name]), values,
                                                              max_size=3)))
    documents = st.lists(section, max_size=4).map(
        lambda sections: ["bytes", yaml.safe_dump(dict(sections), allow_unicode=True).encode("utf-8")])
    return st.one_of(documents, recipes(read(world.config)), odd_text())


def set_strings(world: World) -> st.SearchStrategy[list[str]]:
    keys = st.one_of(st.sampled_from([f"{s}.{k}" for s, keys in CONFIG_KEYS.items() for k in keys]),
                     st.text(max_size=12))
    values = st.one_of(st.text(max_size=12), st.sampled_from(["[1, 2", "{a: 1}", "-1", "1e999", "nan", "null", ""]))
    return st.lists(st.one_of(st.tuples(keys, values).map("=".join), st.text(max_size=20)), min_size=1, max_size=3)


def check_token_cache(world: World, recipe: list) -> None:
    """A damaged token cache (RUN/cache/*.arrow) under `mt prepare` of the same run."""
    work = workdir(world)
    run = shutil.copytree(world.run, work / "run", ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
    for cached in sorted((run / "cache").glob("train*.arrow")):
        cached.write_bytes(damaged(recipe, cached.read_bytes()))
    with writes_only(world.root, lambda name: name.startswith("work/")):
        one_line_or_success(mt_cli(["prepare", "-c", str(world.config), "--run-dir", "run"], work), "mt prepare")


LOCK_RECORD = b'{"command": "mt train", "pid": 1, "host": "h", "since": "2026-12-01 10:00:00"}'


def check_run_lock(world: World, recipe: list) -> None:
    """Whatever a run's lock file holds (a killed holder's record, cut short, bytes): it is taken over."""
    from mt.core.run_dir import RunDir
    from mt.core.run_lock import lock_run_dir

    work = workdir(world)
    (work / "run").mkdir()
    RunDir(work / "run").lock.write_bytes(damaged(recipe, LOCK_RECORD))
    with contextlib.ExitStack() as holding:
        loaded(lambda: holding.enter_context(lock_run_dir(work / "run", "mt train")), "a lock file")
        text = RunDir(work / "run").lock.read_text(encoding="utf-8")
    if json.loads(text)["pid"] != os.getpid():
        raise Failure(f"the lock was not taken over: {text!r}")


def export_files(directory: Path) -> st.SearchStrategy[list]:
    """One file of an export directory, damaged (or removed: None)."""
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    return st.sampled_from(names).flatmap(
        lambda name: st.tuples(st.just(name), st.one_of(st.none(), recipes(read(directory / name)))).map(list))


def damaged_copy(directory: Path, work: Path, example: list) -> Path:
    copy = shutil.copytree(directory, work / directory.name)
    name, recipe = example
    if recipe is None:
        (copy / name).unlink()
    else:
        (copy / name).write_bytes(damaged(recipe, read(directory / name)))
    return copy


def check_ct2_export(world: World, example) -> None:
    work = workdir(world)
    damaged_copy(world.ct2, work, example)
    with writes_only(world.root, lambda name: name.startswith("work/")):
        args = ["translate", "--engine", "ctranslate2", "--checkpoint", "ct2", "我爱你。"]
        one_line_or_success(mt_cli(args, work), "mt translate --engine ctranslate2")


def check_hf_export(world: World, example) -> None:
    """A damaged Hugging Face export: read as a checkpoint by mistake, and replaced by a new export (only when its
    mt.json still says it is one of mt's)."""
    work = workdir(world)
    copy = damaged_copy(world.hf, work, example)
    with writes_only(world.root, lambda name: name.startswith("work/hf/") or name == "work/hf"):
        one_line_or_success(mt_cli(["translate", "--checkpoint", "hf", "我爱你。"], work), "mt translate")
        one_line_or_success(mt_cli(["export", "--huggingface", "hf", "--checkpoint", str(world.checkpoint)], work),
                            "mt export --huggingface")
    if not copy.is_dir():
        raise Failure("the export directory is gone")


def parallel_files(world: World) -> st.SearchStrategy[list]:
    return st.tuples(odd_text(), odd_text()).map(list)


def check_parallel_text(world: World, example: list) -> None:
    """Source and target files as translate, score and evaluate read them: one output line per input line."""
    src, tgt = (damaged(recipe, b"") for recipe in example)
    work = workdir(world)
    (work / "in.zh").write_bytes(src)
    (work / "in.en").write_bytes(tgt)
    model = ["--checkpoint", str(world.checkpoint)]
    made = ("work/in.zh", "work/in.en", "work/out.en", "work/distilled/train.zh", "work/distilled/train.en",
            "work/distilled/distill.json")
    with writes_only(world.root, lambda name: name in made):
        translated = one_line_or_success(mt_cli(["translate", *model, "--input", "in.zh", "-o", "out.en"], work),
                                         "mt translate --input")
        if translated.status == 0:
            lines = src.count(b"\n") + (not src.endswith(b"\n") and bool(src))
            out = (work / "out.en").read_bytes().count(b"\n")
            if out != lines:
                raise Failure(f"{lines} lines in, {out} out")
        one_line_or_success(mt_cli(["translate", *model], work, stdin=src), "mt translate < file")
        one_line_or_success(mt_cli(["score", *model, "--src", "in.zh", "--tgt", "in.en"], work), "mt score")
        one_line_or_success(mt_cli(["evaluate", "--hyp", "in.en", "--ref", "in.zh"], work), "mt evaluate --hyp")
        distilled = one_line_or_success(mt_cli(["distill", "--teacher", str(world.checkpoint), "-s", "in.zh", "-o",
                                                "distilled"], work), "mt distill")
        if distilled.status == 0:
            pairs = [(work / "distilled" / name).read_bytes().count(b"\n") for name in ("train.zh", "train.en")]
            if pairs[0] != pairs[1]:
                raise Failure(f"mt distill: {pairs[0]} sources, {pairs[1]} translations")


DOCUMENT_SAMPLES = {
    ".html": b"<html><body><p>\xe6\x88\x91\xe7\x88\xb1<b>\xe4\xbd\xa0</b>\xe3\x80\x82</p><pre>x</pre></body></html>",
    ".srt": "1\n00:00:01,000 --> 00:00:02,000\n我爱你。\n\n2\n00:00:03,000 --> 00:00:04,000\n你好\n\n".encode(),
}


def documents(world: World) -> st.SearchStrategy[list]:
    """An .html, .srt or .docx file, damaged."""
    return st.sampled_from(sorted(DOCUMENT_SAMPLES) + [".docx"]).flatmap(
        lambda suffix: st.tuples(st.just(suffix), st.one_of(recipes(document_sample(suffix)), odd_text(),
                                                            *([zip_recipes(document_sample(suffix))]
                                                              if suffix == ".docx" else []))).map(list))


@functools.cache
def document_sample(suffix: str) -> bytes:
    return docx_sample() if suffix == ".docx" else DOCUMENT_SAMPLES[suffix]


def docx_sample() -> bytes:
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph("我爱")
    paragraph.add_run("你").bold = True
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def check_document(world: World, example: list) -> None:
    suffix, recipe = example
    work = workdir(world)
    (work / f"in{suffix}").write_bytes(damaged(recipe, document_sample(suffix)))
    with writes_only(world.root, lambda name: name in (f"work/in{suffix}", f"work/out{suffix}")):
        one_line_or_success(mt_cli(["translate", "--checkpoint", str(world.checkpoint), "--input", f"in{suffix}",
                                    "-o", f"out{suffix}"], work), f"mt translate --input in{suffix}")


ROUTES = ["/", "/translate", "/translate_file", "/download_file/x", "/detect", "/languages", "/frontend/settings",
          "/health", "/api/translate", "/api/info", "/index.html", "/../etc/passwd"]
CONTENT_TYPES = ["application/json", "application/x-www-form-urlencoded", "multipart/form-data", "text/plain",
                 "application/json; charset=latin-1", "multipart/form-data; boundary=x"]


def requests(world: World) -> st.SearchStrategy[dict]:
    """HTTP requests to every route: LibreTranslate-shaped fields with random values, as JSON, a form or a file
    upload, or random bytes; random query strings and headers."""
    text = st.one_of(st.text(max_size=40), st.sampled_from(["我爱你。", "<p>我爱<b>你</b></p>", "你好。" * 80]))
    value = st.one_of(text, st.integers(), st.none(), st.booleans(), st.lists(text, max_size=10),
                      st.dictionaries(st.text(max_size=5), text, max_size=2))
    fields = st.fixed_dictionaries({}, optional={
        "q": value, "source": st.one_of(st.sampled_from(["zh", "en", "auto", ""]), value),
        "target": st.one_of(st.sampled_from(["en", "zh"]), value),
        "format": st.one_of(st.sampled_from(["text", "html"]), value),
        "alternatives": st.one_of(st.integers(-2, 20), value), "api_key": value, "beam_size": value, "n_best": value})
    upload = st.tuples(st.one_of(st.sampled_from(["a.txt", "a.html", "a.srt", "a.docx", "a", "../a.txt"]),
                                 st.text(max_size=10)),
                       st.one_of(odd_text().map(lambda recipe: recipe[1]), st.binary(max_size=500)))
    body = st.one_of(fields.map(lambda f: {"json": f}), fields.map(lambda f: {"form": f}),
                     st.tuples(fields, upload).map(lambda t: {"form": t[0], "file": list(t[1])}),
                     st.binary(max_size=500).map(lambda b: {"raw": b}))
    header_text = st.from_regex(r"[!-~]([ -~]{0,30}[!-~])?", fullmatch=True)  # what HTTP allows in a value
    return st.fixed_dictionaries({
        "method": st.sampled_from(["GET", "POST", "POST", "POST", "PUT", "OPTIONS", "HEAD"]),
        "path": st.one_of(st.sampled_from(ROUTES), st.text(st.characters(min_codepoint=33, max_codepoint=126),
                                                           max_size=20).map(lambda p: "/" + p)),
        "query": st.dictionaries(st.sampled_from(["q", "source", "target", "format", "x"]), st.text(max_size=10),
                                 max_size=3),
        "headers": st.dictionaries(st.sampled_from(["content-type", "accept-language", "x-forwarded-for", "origin",
                                                    "authorization", "x-any"]),
                                   st.one_of(st.sampled_from(CONTENT_TYPES), header_text), max_size=3),
        "body": body})


def check_request(world: World, request: dict) -> None:
    """Any request gets an answer below 500 in time, and a file it was promised can be downloaded."""
    import httpx

    body = request["body"]
    form = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in body.get("form", {}).items()}
    content = {"json": body["json"]} if "json" in body else {"content": body["raw"]} if "raw" in body else \
        {"data": form, "files": {"file": tuple(body["file"])}} if "file" in body else {"data": form}
    try:
        with httpx.Client(timeout=BOUND_SECONDS) as client:
            # the whole URL, not a base_url: a path such as "//::" joined to one would be read as a host and port
            answer = client.request(request["method"], world.server() + request["path"], params=request["query"],
                                    headers=request["headers"], **content)
            if answer.status_code >= 500:
                raise Failure(f"{request['method']} {request['path']}: {answer.status_code} {answer.text[:300]}")
            if answer.status_code == 200 and request["path"] == "/translate_file":
                download = client.get(answer.json()["translatedFileUrl"])
                if download.status_code != 200:
                    raise Failure(f"the translated file: {download.status_code} {download.text[:300]}")
    except httpx.TimeoutException:
        raise Failure(f"{request['method']} {request['path']}: no answer in {BOUND_SECONDS} s")


DOORS = {door.name: door for door in [
    Door("checkpoint", lambda w: st.one_of(recipes(read(w.checkpoint)), zip_recipes(read(w.checkpoint))),
         check_checkpoint),
    Door("checkpoint-code", code_pickle, check_code),
    Door("shortlist", lambda w: st.one_of(recipes(read(w.shortlist)), zip_recipes(read(w.shortlist))),
         check_shortlist),
    Door("tokenizer", lambda w: recipes(read(w.run / "spm.model")), check_tokenizer),
    Door("config", yaml_documents, check_config),
    Door("set", set_strings, check_sets),
    Door("token-cache", lambda w: recipes(read(next((w.run / "cache").glob("train*.arrow")))), check_token_cache),
    Door("run-lock", lambda w: st.one_of(recipes(LOCK_RECORD), odd_text()), check_run_lock),
    Door("ct2-export", lambda w: export_files(w.ct2), check_ct2_export),
    Door("hf-export", lambda w: export_files(w.hf), check_hf_export),
    Door("parallel-text", parallel_files, check_parallel_text),
    Door("document", documents, check_document),
    Door("http", requests, check_request),
]}
