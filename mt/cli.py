"""The `mt` command line: parses options, loads the config, calls one function per command.

A user's mistake (MtError) is printed as one line on stderr with a non-zero exit; `--debug` shows the traceback.
Each command imports what it needs when it runs, so that `mt --help` answers without loading torch.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import logging
import os
import sys
import typing
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from mt.core.atomic import CHECKPOINT, DOCX, PNG, TEXT, atomic_open, atomic_write_bytes, check_replaceable
from mt.config import DecodeConfig, Device, Engine, Keep
from mt.core.console import setup_logging
from mt.core.errors import MtError
from mt.core.lines import BOM, Encoding, file_encoding
from mt.core.memory import bound_kernel_cache, use_huge_pages
from mt.core.openmp import load_ctranslate2_first, without_a_thread_team
from mt.core.schema import flag_of, help_of
from mt.serve.limits import ServeConfig

log = logging.getLogger(__name__)

CHUNK_LINES = 2000  # lines read, sorted by length and translated together when streaming
TextFormat = Literal["text", "html"]
DOCUMENTS = {".html", ".htm", ".srt", ".docx"}  # --input suffixes translated as documents (mt/text/documents.py)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and use Transformer translation models (Attention Is All You Need).")

ConfigOption = Annotated[list[Path], typer.Option(
    "--config", "-c", help="YAML config; repeat to layer files (later ones override earlier ones).")]
SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override one config key, e.g. --set train.max_steps=200 (repeatable).")]
RunDirOption = Annotated[Optional[str], typer.Option("--run-dir", help="Default: runs/<config name>.")]
DeviceOption = Annotated[Optional[Device], typer.Option(
    "--device", help="auto: cuda when there is a GPU, else cpu (mt train: default train.device).")]
CheckpointOption = Annotated[Optional[Path], typer.Option(
    "--checkpoint", help="Default: best.pt of the most recently trained run under runs/.")]
EnsembleOption = Annotated[Optional[list[Path]], typer.Option(
    "--checkpoint", help="Default: best.pt of the most recently trained run under runs/. Repeat to translate with "
    "an ensemble of models that share a vocabulary (their log-probabilities averaged at every step).")]
WeightsOption = Annotated[Optional[list[float]], typer.Option(
    "--weights", help="With several --checkpoint: each model's weight in the ensemble, in order (repeatable; "
    "default equal).")]


def _engine_chosen(engine: Engine) -> Engine:
    if engine == "ctranslate2":  # while parsing, before the command loads torch
        load_ctranslate2_first()
    return engine


EngineOption = Annotated[Engine, typer.Option(
    "--engine", help="mt, or ctranslate2 to use a model made by `mt export --ctranslate2 DIR` "
    "(--checkpoint DIR; default: the latest run's ctranslate2/).", callback=_engine_chosen)]
ComputeTypeOption = Annotated[str, typer.Option(
    "--compute-type", help="mt's engine: float32 (auto, default), or bfloat16: products by bf16 weights, where "
    "the CPU (AVX512-BF16 or AMX) or GPU has them in hardware. --engine ctranslate2: CTranslate2's compute type "
    "(default, float32, int8, int8_float32, int16, float16, bfloat16, …; default: the export's own); auto: int8 "
    "where it is faster (an Intel CPU with 8-bit products in hardware, VNNI; an AMD CPU with AVX2 and no AVX-512), "
    "else default.")]


def config_options(name: str, section: type, panel: str, given_only: bool = False):
    """A command gets one option per key of the config section `section` (its name from the key's flag, its help
    from the key's), and receives them as `name`: an instance of the section, or with `given_only` a dict of the
    keys whose options were given (the others stay the checkpoint's). The options are declared once, as the
    section's keys, like fairseq's options made from its dataclasses."""
    hints = typing.get_type_hints(section)
    keys = dataclasses.fields(section)

    def option(f: dataclasses.Field) -> inspect.Parameter:
        kind = hints[f.name]
        kind = typing.get_args(kind)[0] if typing.get_origin(kind) is Annotated else kind
        return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                 annotation=Annotated[Optional[kind] if given_only else kind,
                                                      typer.Option(_switch(flag_of(f)) if kind is bool else flag_of(f),
                                                                   help=help_of(f),
                                                                   rich_help_panel=panel)],
                                 default=None if given_only else f.default)

    def decorate(command):
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != name]

        @functools.wraps(command)
        def with_section(**values):
            chosen = {f.name: values.pop(f.name) for f in keys}
            values[name] = ({k: v for k, v in chosen.items() if v is not None} if given_only
                            else section(**chosen))
            return command(**values)

        parameters = own + [option(f) for f in keys]
        with_section.__signature__ = inspect.Signature(parameters)
        with_section.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_section

    return decorate


def _switch(flag: str) -> str:
    """A yes/no key's pair of options: --split/--no-split."""
    return f"{flag}/--no-{flag[2:]}"


DECODE_FLAGS = {f.name: flag_of(f) for f in dataclasses.fields(DecodeConfig)}  # for errors that name the option
decode_options = config_options("decode", DecodeConfig, "Decoding (default: the checkpoint's decode settings)",
                                given_only=True)


@dataclass
class GlobalOptions:
    debug: bool = False


@app.callback()
def options(ctx: typer.Context,
            debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
            quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Show only warnings and errors.")] = False,
            verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show debugging messages too.")] = False
            ) -> None:
    """Options for every command, given before it (mt --quiet train …). Results go to stdout; progress,
    reports and warnings to stderr."""
    ctx.obj.debug = debug
    setup_logging("quiet" if quiet else "verbose" if verbose else "normal")


def _load(configs: list[Path], sets: list[str] | None, device: Device | None = None, run_dir: str | None = None):
    from mt.config import load_config

    overrides = list(sets or [])
    if device:
        overrides.append(f"train.device={device}")
    return load_config(configs, overrides, run_dir or "")


@app.command()
def train(config: ConfigOption, set_: SetOption = None, device: DeviceOption = None,
          resume: Annotated[bool, typer.Option("--resume", help="Continue the run from its last.pt.")] = False,
          run_dir: RunDirOption = None,
          init_from: Annotated[Optional[Path], typer.Option(
              "--init-from", help="Start a new run from this checkpoint's weights and tokenizer (fine-tuning; a "
              "model of fewer layers, a student, takes an even spread of its layers, first and last kept); with "
              "--resume, a run that has checkpoints continues instead.")] = None,
          keep: Annotated[Optional[list[str]], typer.Option(
              "--keep", help="With --init-from, also take over the checkpoint's optimizer moments, learning-rate "
              "schedule (no second warm-up) or data position (repeatable): optimizer, schedule, position.")]
          = None):
    """Train a model: tokenizer (if missing) → data → Transformer → checkpoints in the run directory."""
    from mt.train.loop import train as run_training

    if keep and init_from is None:
        raise MtError("--keep goes with --init-from")
    for part in keep or ():
        if part not in typing.get_args(Keep):
            raise MtError(f"--keep {part}: must be one of {', '.join(typing.get_args(Keep))}")
    run_training(_load(config, set_, device, run_dir), resume=resume, init_from=init_from, keep=frozenset(keep or ()))


@app.command()
def prepare(config: ConfigOption, set_: SetOption = None, run_dir: RunDirOption = None):
    """Prepare a run's data without training: tokenizer (if missing) and the cached token ids."""
    from mt.train.prepare import prepare as prepare_run

    prepare_run(_load(config, set_, run_dir=run_dir))


@app.command()
def clean(config: ConfigOption, set_: SetOption = None, run_dir: RunDirOption = None,
          sample: Annotated[int, typer.Option("--sample", min=0, help="Clean a random sample of this many pairs of "
                                              "each training corpus (0: all of them).")] = 0,
          output: Annotated[Optional[Path], typer.Option(
              "--output", "-o", help="Where report.md and removed.tsv go (default: RUN/clean).")] = None):
    """Run the contamination guard and data.filters over the training corpora without training: report.md says
    what each step removed, with examples; removed.tsv lists every removed pair with its reason."""
    from mt.clean.report import clean as clean_corpora

    clean_corpora(_load(config, set_, run_dir=run_dir), sample, output)


@app.command()
def average(run_dir: Annotated[Path, typer.Argument(help="A run directory (holding checkpoints/step-*.pt).")],
            last: Annotated[int, typer.Option("--last", min=1, help="How many of the newest checkpoints.")] = 5,
            output: Annotated[Optional[Path], typer.Option(
                "--output", "-o", help="Default: RUN_DIR/checkpoints/average.pt")] = None):
    """Average the weights of a run's last N checkpoints into one checkpoint for translate and evaluate."""
    from mt.exchange.checkpoint import average_checkpoints, checkpoint_dir, save_checkpoint

    output = output or checkpoint_dir(run_dir) / "average.pt"
    _check_outputs((output, CHECKPOINT))
    state = average_checkpoints(run_dir, last)
    save_checkpoint(state, output)
    log.info(f"averaged {', '.join(state['averaged'])} → {output}")


@app.command()
@decode_options
def translate(text: Annotated[Optional[list[str]], typer.Argument(help="Texts to translate.")] = None,
              input: Annotated[Optional[Path], typer.Option(
                  "--input", "-i", help="A text file (.txt or any other name: one or more sentences per line), or a "
                  "document: .html, .htm, .srt (subtitles), .docx (Word).")] = None,
              output: Annotated[Optional[Path], typer.Option(
                  "--output", "-o", help="Where the translation goes, in the input's format.")] = None,
              format: Annotated[Optional[TextFormat], typer.Option(
                  "--format", help="text, or html: the input is HTML (default: by --input's suffix).")] = None,
              checkpoint: EnsembleOption = None, weights: WeightsOption = None, device: DeviceOption = "auto",
              engine: EngineOption = "mt", compute_type: ComputeTypeOption = "auto", decode: dict | None = None,
              attention: Annotated[Optional[Path], typer.Option(
                  "--attention", help="Draw the cross-attention of the translation of one sentence into this PNG: "
                  "a panel per decoder layer, heads averaged.")] = None,
              layer: Annotated[Optional[int], typer.Option("--layer", help="With --attention: this layer only.")]
              = None,
              head: Annotated[Optional[int], typer.Option("--head", help="With --attention: this head only "
                                                          "(of --layer, default the last).")] = None):
    """Translate texts given as arguments, in --input FILE, or on stdin (line by line).

    Each line is split into sentences (--no-split: translated whole) and its translation keeps its shape. Documents
    (.html, .srt, .docx) keep their markup, timings and styles. Plain text is read and translated in chunks, and
    each chunk's lines are written as soon as they are done.
    """
    if text and input:
        raise MtError("give sentences as arguments or --input FILE, not both")
    if attention is not None and (len(text or []) != 1 or engine != "mt"):
        raise MtError("--attention draws one translation: give one sentence as an argument (engine mt)")
    document = format == "html" or (input is not None and format is None and input.suffix.lower() in DOCUMENTS)
    _check_output_format(input, output, format)
    _check_outputs((output, DOCX if output is not None and output.suffix.lower() == ".docx" else TEXT),
                   (attention, PNG), inputs=(input,))
    if document:
        return _translate_document(text, input, output, format, checkpoint, weights, device, engine, compute_type,
                                   decode)
    from tqdm import tqdm

    from mt.decode.translator import Translation, load_translator, translate_stream
    from mt.text.texts import translate_texts

    lines, chunk = _input_lines(text, input)  # first: a missing input file is reported before the model loads
    encoding = file_encoding(input) if input is not None else Encoding()  # the input's, kept in its translation
    if encoding.bom:  # the mark is the file's, not its first line's
        lines = (line.removeprefix(BOM) if n == 0 else line for n, line in enumerate(lines))
    translator = load_translator(checkpoint, device, engine, weights, compute_type)
    split, decode = _split_and_decode(translator, decode)

    def translate_chunk(lines: list[str], first: int) -> list[list[Translation]]:
        if decode.nbest == 1:
            return [[Translation(t, 0.0)] for t in translate_texts(translator, lines, decode, split)]
        return translator.translate(lines, decode, first)  # n-best lists are of whole lines, cut to fit the model

    results = translate_stream(translate_chunk, lines, chunk)
    # A progress bar for a person watching the terminal while the translations go to a file or a pipe.
    bar = sys.stderr.isatty() and (output is not None or not sys.stdout.isatty()) and not text
    with _line_writer(output, encoding) as write:
        for i, hyps in enumerate(tqdm(results, unit=" lines", disable=not bar, file=sys.stderr)):
            if decode.nbest == 1:
                write(hyps[0].text)
            else:
                for t in hyps:
                    write(f"{i} ||| {t.text} ||| {t.score:.4f}")
    if attention is not None:
        from mt.plots import draw_attention

        draw_attention(translator.attention(text[0], hyps[0].text), attention, layer, head)
        log.info(f"attention map → {attention}")


def _split_and_decode(translator, given: dict) -> tuple[bool, DecodeConfig]:
    """Whether to split sentences, and the decode settings: the checkpoint's, with the options given."""
    given = dict(given)
    split = given.pop("split_sentences", translator.decode.split_sentences)
    return split, _decoding(translator, given)


def _decoding(translator, given: dict, **fixed) -> DecodeConfig:
    """The checkpoint's decode settings with the options given; a shortlist is read now, so that a bad one is
    reported before anything is translated."""
    decode = translator.decode.replace(DECODE_FLAGS, **given, **fixed)
    if decode.shortlist:
        translator.engine.shortlist(decode.shortlist)
    return decode


def _translate_document(text, input, output, format, checkpoint, weights, device, engine, compute_type, decode):
    """An HTML text, or a document file, translated whole and written in its own format."""
    from mt.core.lines import read_bytes
    from mt.decode.translator import load_translator
    from mt.text.documents import read_document
    from mt.text.texts import translate_marked

    if input is not None:
        data, name = read_bytes(input), input.name if format is None else f"{input.stem}.html"
    else:
        data, name = ("\n".join(text) if text else sys.stdin.read()).encode("utf-8"), "stdin.html"
    found = read_document(name, data)  # first: a bad file is reported before the model loads
    translator = load_translator(checkpoint, device, engine, weights, compute_type)
    split, decode = _split_and_decode(translator, decode)
    result = found.render(translate_marked(translator, found.texts, decode, split))
    if output is not None:
        atomic_write_bytes(output, result, DOCX if output.suffix.lower() == ".docx" else TEXT)
    elif name.lower().endswith(".docx"):
        raise MtError(f"{input}: a Word document's translation needs --output FILE.docx")
    else:
        sys.stdout.write(result.decode("utf-8"))
        sys.stdout.flush()


@app.command()
def plot(run_dir: Annotated[Path, typer.Argument(help="A run directory (with its log.jsonl).")],
         output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Default: RUN_DIR/training.png")]
         = None):
    """Draw a run's training curves: loss (training and dev), learning rate, dev BLEU/chrF and tokens/s."""
    from mt.plots import plot_training

    output = output or run_dir / "training.png"
    plot_training(run_dir, output)
    log.info(f"training curves → {output}")


@app.command()
def info(checkpoint: Annotated[Path, typer.Argument(help="A checkpoint file.")]):
    """Describe a checkpoint: step, parameters, vocabularies, dev scores with their sacreBLEU signature, config."""
    import textwrap

    import torch
    import yaml

    from mt.exchange.checkpoint import cleaning_line, load_model, started_how

    model, tok, _, state = load_model(checkpoint, torch.device("cpu"))
    dev = state.get("dev") or {}
    vocab = (f"{tok.src_vocab_size:,} pieces, joint" if tok.joint
             else f"{tok.src_vocab_size:,} source and {tok.tgt_vocab_size:,} target pieces")
    averaged = f" (average of {', '.join(state['averaged'])})" if "averaged" in state else ""
    print(f"checkpoint: {checkpoint}{averaged}")
    print(f"step: {state.get('step', 0):,}")
    if "imported" in state:
        print(f"imported from: {state['imported']['from']} (mt import --{state['imported']['format']})")
    started = state.get("init_from")
    while started:  # fine-tuned from a checkpoint, itself perhaps fine-tuned from another
        print(f"started from: {started['checkpoint']} (step {started['step']:,}){started_how(started)}")
        started = started.get("from")
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
    print(f"vocabulary: {vocab} (hash {state['tokenizer']['vocab_hash']})")
    print(cleaning_line(state.get("cleaning")))
    if "dev_bleu" in dev:
        print(f"dev: BLEU {dev['dev_bleu']:.2f}, chrF {dev['dev_chrf']:.2f}, loss {dev['dev_loss']:.3f}, "
              f"perplexity {dev['dev_ppl']:.1f} (greedy search)")
        print(f"  BLEU signature: {dev.get('bleu_signature', 'not recorded by this checkpoint')}")
        print(f"  chrF signature: {dev.get('chrf_signature', 'not recorded by this checkpoint')}")
    else:
        print("dev: not validated at this checkpoint")
    print("config:\n" + textwrap.indent(yaml.safe_dump(state["config"], sort_keys=False, allow_unicode=True), "  "),
          end="")


def _check_output_format(input: Path | None, output: Path | None, format: str | None) -> None:
    """Refuse, before any work, an --output whose suffix names another document format than the translation's (a
    subtitle file's translation named .docx); any text (plain, HTML, subtitles) may go to a .txt file or one whose
    suffix names no format."""
    if output is None:
        return
    from mt.text.documents import FORMATS

    made = "HTML" if format == "html" else FORMATS.get(input.suffix.lower(), "text") if input else "text"
    named = FORMATS.get(output.suffix.lower())
    word = made == "Word document"
    if named != made and (named not in (None, "text") or word):
        endings = ", ".join(suffix for suffix, kind in FORMATS.items() if kind == made or (kind == "text" and not word))
        said = f"its suffix names {_a(named)}, but " if named else ""
        raise MtError(f"--output {output}: {said}the translation is {_a(made)}; choose a name ending in {endings}"
                      + ("" if word else ", or a suffix that names no format"))


def _a(kind: str) -> str:
    """A format's name as a phrase: "a Word document", "HTML", "text"."""
    return "a Word document" if kind == "Word document" else kind


def _check_outputs(*outputs, inputs: tuple = ()) -> None:
    """Refuse, before any work, output paths given as (path or None, kind) where something of another kind is, or
    that are one of the command's `inputs` (paths or None): its result would replace what it reads."""
    for path, kind in outputs:
        if path is None:
            continue
        check_replaceable(path, kind)
        for read in inputs:
            if read is not None and path.is_file() and Path(read).is_file() and os.path.samefile(path, read):
                raise MtError(f"{path}: it is also this command's input, which its output would replace; "
                              f"choose another path")


def _input_lines(text: list[str] | None, input: Path | None):
    """The lines to translate and how many to translate at a time: the arguments all at once, a file or
    piped stdin in chunks, and a person typing at a terminal line by line."""
    from mt.core.lines import iter_file_lines, iter_lines

    if text:
        return text, len(text)
    if input is not None:
        return iter_file_lines(input), CHUNK_LINES  # opened now: a missing file is reported first
    if sys.stdin.isatty():
        log.info("reading sentences from stdin (Ctrl-D to end)")
        return iter_lines(sys.stdin.buffer, "stdin"), 1
    return iter_lines(sys.stdin.buffer, "stdin"), CHUNK_LINES


@app.command()
@decode_options
def evaluate(checkpoint: EnsembleOption = None, weights: WeightsOption = None,
             config: Annotated[Optional[list[Path]], typer.Option(
                 "--config", "-c", help="Take the test set from this config instead of the checkpoint's.")] = None,
             set_: SetOption = None,
             src: Annotated[Optional[Path], typer.Option("--src", help="Source file to translate.")] = None,
             ref: Annotated[Optional[list[Path]], typer.Option("--ref", help="Reference file (repeatable).")] = None,
             hyp: Annotated[Optional[Path], typer.Option("--hyp", help="Score this output; translate nothing.")] = None,
             tgt_lang: Annotated[Optional[str], typer.Option("--tgt-lang", help="For --hyp (default en).")] = None,
             output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Save the translations.")] = None,
             device: DeviceOption = "auto", decode: dict | None = None):
    """Translate a test set (the config's, or --src/--ref) and print sacreBLEU BLEU and chrF with signatures."""
    if hyp is not None:  # scoring alone: no torch to load
        from mt.core.lines import read_lines
        from mt.core.scoring import score

        if not ref:
            raise MtError("--hyp needs at least one --ref")
        print("\n".join(score(read_lines(hyp), [read_lines(r) for r in ref], tgt_lang or "en").lines()))
        return
    if src is not None and not ref:
        raise MtError("--src needs at least one --ref")
    _check_outputs((output, TEXT), inputs=(src, *(ref or [])))
    from mt.decode.evaluate import evaluate as evaluate_test_set, read_test_files, read_test_set
    from mt.decode.translator import load_translator

    translator = load_translator(checkpoint, device, weights=weights)
    if src is not None:
        sources, references = read_test_files(src, ref)
    else:
        sources, references = read_test_set(_load(config, set_).data if config else translator.config.data)
    split = decode.pop("split_sentences", False)  # a test set's lines are aligned with its references' lines
    decode = _decoding(translator, decode)
    translate = None
    if split:
        from mt.text.texts import translate_texts

        translate = lambda lines: translate_texts(translator, lines, decode)  # noqa: E731
    print("\n".join(evaluate_test_set(translator, sources, references, decode, output, translate).lines()))


def _parallel_lines(src: Path, tgt: Path) -> tuple[list[str], list[str]]:
    """The lines of --src and --tgt, one translation per source line."""
    from mt.core.lines import read_lines

    sources, targets = read_lines(src), read_lines(tgt)
    if len(sources) != len(targets):
        raise MtError(f"--src {src} has {len(sources):,} lines but --tgt {tgt} has {len(targets):,}: "
                      "give one translation per source line")
    return sources, targets


@app.command()
def score(src: Annotated[Path, typer.Option("--src", help="Source lines.")],
          tgt: Annotated[Path, typer.Option("--tgt", help="Their translations, one per source line.")],
          checkpoint: EnsembleOption = None, weights: WeightsOption = None, engine: EngineOption = "mt",
          compute_type: ComputeTypeOption = "auto", device: DeviceOption = "auto",
          output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the scores here.")] = None):
    """Score given translations (forced decoding): for each pair of lines, the model's log-probability of the
    translation, end of sentence included, and its mean per token, as `LOG_PROB<TAB>MEAN`."""
    import math
    import time

    from mt.decode.translator import load_translator

    _check_outputs((output, TEXT), inputs=(src, tgt))
    sources, targets = _parallel_lines(src, tgt)  # first: bad input is reported before the model loads
    translator = load_translator(checkpoint, device, engine, weights, compute_type)
    start = time.perf_counter()
    scores = translator.score(sources, targets)
    seconds = time.perf_counter() - start
    with _line_writer(output) as write:
        for pair in scores:
            write(f"{pair.log_prob:.4f}\t{pair.mean:.4f}")
    tokens = sum(pair.tokens for pair in scores)
    if tokens:  # an empty file has none
        mean = sum(pair.log_prob for pair in scores) / tokens
        log.info(f"scored {len(scores):,} pairs, {tokens:,} tokens: {mean:.4f} log-prob per token (perplexity "
                 f"{math.exp(-mean):.2f}), {len(scores) / seconds:.1f} sentences/s")


@app.command()
@decode_options
def distill(teacher: Annotated[list[Path], typer.Option(
                "--teacher", help="A checkpoint, or a CTranslate2 export with --engine ctranslate2; repeat for an "
                "ensemble.")],
            source: Annotated[list[Path], typer.Option(
                "--source", "-s", help="Source-language text, one sentence per line (repeatable): the training "
                "corpus's source side, and any monolingual text.")],
            output: Annotated[Path, typer.Option(
                "--output", "-o", help="The new corpus's directory: train.<src> and train.<tgt>. A stopped "
                "distillation there continues where it was.")],
            weights: WeightsOption = None, device: DeviceOption = "auto", engine: EngineOption = "mt",
            compute_type: ComputeTypeOption = "auto", decode: dict | None = None):
    """Translate source text with a teacher into a training corpus for a student: sequence-level knowledge
    distillation (beam search), or back-translation (a reverse model, --sample). Each line is translated whole."""
    from tqdm import tqdm

    from mt.core.lines import iter_file_lines
    from mt.decode.distill import corpus_files, distill as distill_corpus, recipe
    from mt.decode.translator import load_translator

    for path in source:
        if not path.is_file():
            raise MtError(f"{path}: no such file")
    translator = load_translator(teacher, device, engine, weights, compute_type)
    decode.pop("split_sentences", None)  # a training line is one pair, translated whole
    decode = _decoding(translator, decode, split_sentences=False)
    if decode.nbest != 1:
        raise MtError("--nbest: a distillation keeps the best translation of each line")
    total = sum(1 for path in source for _ in iter_file_lines(path))
    with tqdm(total=total, unit=" lines", disable=not sys.stderr.isatty(), file=sys.stderr) as bar:
        made_by = recipe(teacher, source, decode, engine, translator.engine.compute_type)
        done = distill_corpus(translator, made_by, source, output, decode, bar.update)
    src, tgt = corpus_files(output, translator)
    log.info(f"{done.pairs:,} pairs → {src} and {tgt}; train a student on them: data.train: {{path: "
             f"{output / 'train'}}} (configs/student-base.yaml, configs/student-tiny.yaml)")


@app.command()
def shortlist(output: Annotated[Path, typer.Option("--output", "-o", help="The shortlist file to write.")],
              checkpoint: CheckpointOption = None,
              translations: Annotated[int, typer.Option(
                  "--translations", min=1, help="Target pieces kept per source piece, likeliest first.")] = 50,
              frequent: Annotated[int, typer.Option(
                  "--frequent", min=0, help="The target language's most frequent pieces, allowed always.")] = 100,
              src: Annotated[Optional[Path], typer.Option(
                  "--src", help="Learn from these source lines instead (with --tgt): a model without its "
                  "training corpora in its config, such as an imported one.")] = None,
              tgt: Annotated[Optional[Path], typer.Option("--tgt", help="Their translations, line by line.")]
              = None):
    """Learn a lexical shortlist from the corpora a checkpoint was trained on (its config's data.train and
    data.extra_train), or from --src and --tgt: translate with --shortlist FILE to score only the target pieces a
    batch's sources may turn into (word-translation tables of IBM Model 1)."""
    import torch

    from mt.data.corpora import TrainingMixture
    from mt.decode.shortlist import SHORTLIST, learn_shortlist
    from mt.exchange.checkpoint import default_checkpoint, load_model

    if (src is None) != (tgt is None):
        raise MtError("give both --src and --tgt (parallel lines), or neither (the checkpoint's training corpora)")
    _check_outputs((output, SHORTLIST))
    sources, targets = _parallel_lines(src, tgt) if src is not None else ([], [])  # bad input before the model
    source = checkpoint or default_checkpoint()
    _, tokenizer, config, _ = load_model(source, torch.device("cpu"))
    if src is None:
        pairs = TrainingMixture(config.data, config.train.seed).pairs
        sources, targets = pairs["src"], pairs["tgt"]
    found = learn_shortlist(sources, targets, tokenizer, translations, frequent, config.train.seed)
    found.save(output)
    log.info(f"shortlist of {source}'s vocabulary from {len(sources):,} pairs → {output} "
             f"(translate with --shortlist {output})")


@app.command()
def export(ctranslate2: Annotated[Optional[Path], typer.Option(
               "--ctranslate2", help="Write a CTranslate2 model directory here.")] = None,
           huggingface: Annotated[Optional[Path], typer.Option(
               "--huggingface", help="Write a Hugging Face Transformers model directory (MarianMTModel) here.")]
           = None,
           checkpoint: CheckpointOption = None,
           quantization: Annotated[Optional[str], typer.Option(
               "--quantization", help="CTranslate2: e.g. int8, int8_float32, float16 (default: keep float32).")]
           = None,
           evaluate: Annotated[bool, typer.Option(
               "--evaluate", help="Hugging Face: also translate the config's test set and put its scores in the "
               "model card.")] = False,
           shortlist: Annotated[Optional[Path], typer.Option(
               "--shortlist", help="CTranslate2: also write this `mt shortlist` file as its vocabulary map "
               "(vmap.txt), which translate_batch(use_vmap=True) reads.")] = None):
    """Convert a checkpoint and its SentencePiece model into a CTranslate2 or a Hugging Face model directory.
    The directory must be new, or an earlier export, which is replaced whole."""
    from mt.exchange.checkpoint import default_checkpoint

    if (ctranslate2 is None) == (huggingface is None):
        raise MtError("give one of --ctranslate2 DIR and --huggingface DIR")
    source = checkpoint or default_checkpoint()
    if shortlist is not None and ctranslate2 is None:
        raise MtError("--shortlist: a vocabulary map is CTranslate2's; give --ctranslate2 DIR")
    if ctranslate2 is not None:
        from mt.decode.ctranslate2 import vocabulary_map
        from mt.exchange.ctranslate2 import EXPORT, export_ctranslate2

        _check_outputs((ctranslate2, EXPORT))
        vmap = None if shortlist is None else lambda tokenizer: vocabulary_map(shortlist, tokenizer,
                                                                               tokenizer.vocab_hash)
        export_ctranslate2(source, ctranslate2, quantization, vmap)
        log.info(f"exported {source} → {ctranslate2} (translate with: mt translate --engine ctranslate2 "
                 f"--checkpoint {ctranslate2})")
        return
    from mt.exchange.huggingface import EXPORT, export_huggingface

    _check_outputs((huggingface, EXPORT))  # before the test set is translated
    test = None
    if evaluate:
        from mt.decode.evaluate import evaluate as evaluate_test_set, read_test_set
        from mt.decode.translator import load_translator

        translator = load_translator(source, "auto")
        test = evaluate_test_set(translator, *read_test_set(translator.config.data), translator.decode)
        log.info("test set: " + " | ".join(test.lines()))
    export_huggingface(source, huggingface, test)
    log.info(f"exported {source} → {huggingface} (use it with MarianMTModel.from_pretrained and "
             f"MarianTokenizer.from_pretrained; its README.md shows how)")


@app.command("import")
def import_(huggingface: Annotated[str, typer.Option(
                "--huggingface", help="A Hugging Face MarianMTModel: a directory (an OPUS-MT model, or mt's own "
                "export), or a hub name such as Helsinki-NLP/opus-mt-zh-en where the hub is reachable.")],
            output: Annotated[Path, typer.Option(
                "--output", "-o", help="A new checkpoint file (NAME.pt), or a new run directory: its "
                "checkpoints/best.pt, tokenizer and config.yaml (to fine-tune with --init-from).")],
            src_lang: Annotated[str, typer.Option("--src-lang", help="The source language, when the model's "
                                                  "tokenizer does not name it.")] = "",
            tgt_lang: Annotated[str, typer.Option("--tgt-lang", help="The target language, likewise.")] = ""):
    """Make an mt checkpoint of a Hugging Face Marian model, which translate, evaluate, serve, both exports,
    ensembles and --init-from then take."""
    from mt.exchange.import_huggingface import import_huggingface

    checkpoint = import_huggingface(huggingface, output, src_lang, tgt_lang)
    log.info(f"imported {huggingface} → {checkpoint} (translate with: mt translate --checkpoint {checkpoint})")


@app.command()
@decode_options
@config_options("limits", ServeConfig, "Limits and batching")
def serve(checkpoint: CheckpointOption = None, engine: EngineOption = "mt", compute_type: ComputeTypeOption = "auto",
          device: DeviceOption = "auto",
          host: Annotated[str, typer.Option("--host", help="The address to listen on: 127.0.0.1 is this machine "
                                            "only; 0.0.0.0 (or ::) every interface.")] = "127.0.0.1",
          port: Annotated[int, typer.Option("--port", help="0: any free port (the log line says which).")] = 5000,
          api_keys: Annotated[Optional[Path], typer.Option(
              "--api-keys", help="A file of API keys, one per line: /translate then needs one of them.")] = None,
          limits: ServeConfig | None = None, decode: dict | None = None):
    """Serve a model over HTTP: LibreTranslate's API (its clients work unchanged), mt's own API, and a page to try
    it in at /. Concurrent requests are decoded together. SIGTERM or Ctrl-C finish the requests in flight, then stop.
    Needs the serve extra (the README's set-up installs it)."""
    if any(importlib.util.find_spec(package) is None for package in ("limits", "starlette", "uvicorn")):
        raise MtError('mt serve needs the serve extra: pip install -e ".[serve]"', exit_code=1)
    from mt.serve.server import read_api_keys, serve as run_server
    from mt.decode.translator import load_translator

    limits.checked()
    keys = read_api_keys(api_keys) if api_keys else frozenset()
    # The worker thread decodes; this one only loads. CTranslate2 starts no torch team here, and its translator
    # keeps the thread count it is built with: torch's, one per core.
    with without_a_thread_team() if engine == "mt" else nullcontext():
        translator = load_translator(checkpoint, device, engine, compute_type=compute_type)
    translator.config.decode = _decoding(translator, decode)  # the server's defaults
    try:
        limits.check_beam(translator.decode.beam_size)
    except MtError:
        raise MtError(f"beam {translator.decode.beam_size} (--beam, or the checkpoint's decode.beam_size): over "
                      f"--max-beam {limits.max_beam}")
    run_server(translator, engine, limits, host, port, keys)


@contextmanager
def _line_writer(output: Path | None, encoding: Encoding = Encoding()):
    """A function that writes one line: to stdout at once, or into `output`, which appears (atomically)
    only when every line is written; with `encoding`'s line end, after its byte-order mark if it has one."""
    if output is None:
        sys.stdout.write(encoding.mark)

        def write(line: str) -> None:
            sys.stdout.write(line + encoding.newline)
            sys.stdout.flush()

        yield write
    else:
        with atomic_open(output, TEXT) as f:
            f.write(encoding.mark.encode("utf-8"))
            yield lambda line: f.write((line + encoding.newline).encode("utf-8"))


def run(args: list[str] | None = None) -> int:
    """The `mt` command's work and its exit status. A user's mistake, in a config or data file or on the command
    line, is printed as one line; `--debug` shows the traceback instead. Anything else raised is a bug of mt's."""
    chosen = GlobalOptions()
    use_huge_pages()
    bound_kernel_cache()
    try:  # Ctrl-C returns 130; a closed pipe exits quietly
        return app(args, standalone_mode=False, prog_name="mt", obj=chosen) or 0
    except (MtError, typer.TyperException) as e:
        if chosen.debug:
            raise
        message = str(e) if isinstance(e, MtError) else e.format_message()
        if message:  # `mt` alone has shown its help and has nothing to add
            print(f"mt: error: {message}", file=sys.stderr)
        return e.exit_code


def main() -> None:
    sys.exit(run())
