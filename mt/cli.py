"""The `mt` command line: parses options, loads the config, calls one function per command.

A user's mistake (MtError) is printed as one line on stderr with a non-zero exit; `--debug` shows the traceback.
Each command imports what it needs when it runs, so that `mt --help` answers without loading torch. The options
that several commands share, and the model a command translates with, are declared in mt/options.py.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import typing
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from mt.config import Device, Keep
from mt.core.atomic import CHECKPOINT, PNG, TEXT, check_outputs
from mt.core.console import setup_logging
from mt.core.errors import MtError
from mt.core.memory import bound_kernel_cache, use_huge_pages
from mt.core.openmp import without_a_thread_team
from mt.options import (CheckpointOption, ConfigOption, DeviceOption, GlossaryModeOption, GlossaryOption, ModelChoice,
                        RunDirOption, SetOption, config_options, decode_options, decoding, model_options,
                        served_model_options, split_and_decode, teacher_options)
from mt.serve.limits import ServeConfig

log = logging.getLogger(__name__)

TextFormat = Literal["text", "html"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and use Transformer translation models (Attention Is All You Need).")


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
def adapt(run_dir: Annotated[Path, typer.Argument(help="A run directory: its checkpoints/best.pt is adapted.")],
          suggestions: Annotated[Path, typer.Option(
              "--suggestions", help="The suggestions database of `mt serve --suggestions`: its accepted "
              "suggestions are the corrections.")],
          max_drop: Annotated[float, typer.Option(
              "--max-drop", min=0, help="The most dev-set BLEU the adapted model may lose against the run's "
              "model and still be used.")] = 0.3,
          set_: SetOption = None, device: DeviceOption = None):
    """Fine-tune a run's model on the corrections its server accepted, with its own training pairs replayed;
    where its dev-set BLEU holds (--max-drop), write it to RUN/checkpoints/adapted.pt."""
    from mt.serve.suggestions import accepted
    from mt.train.adapt import adapt as run_adaptation

    result = run_adaptation(run_dir, accepted(suggestions), max_drop,
                            [*(set_ or []), *([f"train.device={device}"] if device else [])])
    print(result)
    if not result.passed:
        raise typer.Exit(1)


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
    from mt.core.run_dir import RunDir
    from mt.exchange.checkpoint import average_checkpoints, save_checkpoint

    output = output or RunDir(run_dir).average
    check_outputs((output, CHECKPOINT))
    averaged = average_checkpoints(run_dir, last)
    save_checkpoint(averaged, output)
    log.info(f"averaged {', '.join(averaged.averaged)} → {output}")


@app.command()
@decode_options
@model_options
def translate(text: Annotated[Optional[list[str]], typer.Argument(help="Texts to translate.")] = None,
              input: Annotated[Optional[Path], typer.Option(
                  "--input", "-i", help="A text file (.txt or any other name: one or more sentences per line), or a "
                  "document: .html, .htm, .srt (subtitles), .docx (Word).")] = None,
              output: Annotated[Optional[Path], typer.Option(
                  "--output", "-o", help="Where the translation goes, in the input's format.")] = None,
              format: Annotated[Optional[TextFormat], typer.Option(
                  "--format", help="text, or html: the input is HTML (default: by --input's suffix).")] = None,
              attention: Annotated[Optional[Path], typer.Option(
                  "--attention", help="Draw the cross-attention of the translation of one sentence into this PNG: "
                  "a panel per decoder layer, heads averaged.")] = None,
              layer: Annotated[Optional[int], typer.Option("--layer", help="With --attention: this layer only.")]
              = None,
              head: Annotated[Optional[int], typer.Option("--head", help="With --attention: this head only "
                                                          "(of --layer, default the last).")] = None,
              glossary: GlossaryOption = None, glossary_mode: GlossaryModeOption = "hard",
              glossary_report: Annotated[Optional[Path], typer.Option(
                  "--glossary-report", help="With --glossary: write what became of each line's terms here, one "
                  "JSON line per input line.")] = None,
              scores: Annotated[Optional[Path], typer.Option(
                  "--scores", help="Write each line's confidence (0 to 1) and its words' scores here, one JSON line "
                  "per input line (plain text).")] = None,
              model: ModelChoice | None = None, decode: dict | None = None):
    """Translate texts given as arguments, in --input FILE, or on stdin (line by line).

    Each line is split into sentences (--no-split: translated whole) and its translation keeps its shape. Documents
    (.html, .srt, .docx) keep their markup, timings and styles. Plain text is read and translated in chunks, and
    each chunk's lines are written as soon as they are done.
    """
    from mt.text.documents import check_output_format
    from mt.text.files import Lines, glossary_use, output_kind, read_source, translate_terms

    if text and input:
        raise MtError("give sentences as arguments or --input FILE, not both")
    if attention is not None and (len(text or []) != 1 or model.engine != "mt" or format == "html"):
        raise MtError("--attention draws one translation: give one sentence as an argument (engine mt, plain text)")
    check_output_format(input, output, format)
    check_outputs((output, output_kind(output)), (attention, PNG), (glossary_report, TEXT), (scores, TEXT),
                  inputs=(input, glossary))
    source = read_source(text, input, format, output)  # first: a bad input is reported before the model loads
    if scores is not None and not isinstance(source, Lines):
        raise MtError("--scores gives each line's confidence: plain text only")
    terms = translate_terms(glossary, glossary_report, source, model.engine, glossary_mode)
    translator = model.load()
    split, decode = split_and_decode(translator, decode)
    use = glossary_use(terms, translator, glossary_mode)
    if glossary_report is None and scores is None:  # documents take neither (translate_terms, above)
        last = source.translate(translator, decode, split, use)
    else:
        last = source.translate(translator, decode, split, use, glossary_report, scores)
    if attention is not None:
        from mt.plots import draw_attention

        draw_attention(translator.attention(text[0], last), attention, layer, head)
        log.info(f"attention map → {attention}")


@app.command()
def plot(run_dir: Annotated[Path, typer.Argument(help="A run directory (with its log.jsonl).")],
         output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Default: RUN_DIR/training.png")]
         = None):
    """Draw a run's training curves: loss (training and dev), learning rate, dev BLEU/chrF and tokens/s."""
    from mt.core.run_dir import RunDir
    from mt.plots import plot_training

    output = output or RunDir(run_dir).plot
    plot_training(run_dir, output)
    log.info(f"training curves → {output}")


@app.command()
def info(checkpoint: Annotated[Path, typer.Argument(help="A checkpoint file.")]):
    """Describe a checkpoint: step, parameters, vocabularies, dev scores with their sacreBLEU signature, config."""
    from mt.exchange.checkpoint import describe

    print(describe(checkpoint), end="")


@app.command()
@decode_options
@model_options
def evaluate(config: Annotated[Optional[list[Path]], typer.Option(
                 "--config", "-c", help="Take the test set from this config instead of the checkpoint's.")] = None,
             set_: SetOption = None,
             src: Annotated[Optional[Path], typer.Option("--src", help="Source file to translate.")] = None,
             ref: Annotated[Optional[list[Path]], typer.Option("--ref", help="Reference file (repeatable).")] = None,
             hyp: Annotated[Optional[Path], typer.Option("--hyp", help="Score this output; translate nothing.")] = None,
             tgt_lang: Annotated[Optional[str], typer.Option("--tgt-lang", help="For --hyp (default en).")] = None,
             output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Save the translations.")] = None,
             scores: Annotated[Optional[Path], typer.Option(
                 "--scores", help="Write each translation's confidence, its sentence chrF and its words' scores "
                 "here (JSON Lines), and print how well the confidence ranks the translations.")] = None,
             glossary: GlossaryOption = None, glossary_mode: GlossaryModeOption = "hard",
             model: ModelChoice | None = None, decode: dict | None = None):
    """Translate a test set (the config's, or --src/--ref) and print sacreBLEU BLEU and chrF with signatures; with
    --glossary, also how many of its terms the translations hold; with --scores, how well the confidence ranks
    the translations (Spearman's ρ with sentence chrF)."""
    if hyp is not None:  # scoring alone: no torch to load
        from mt.core.lines import read_lines
        from mt.core.scoring import score

        if not ref:
            raise MtError("--hyp needs at least one --ref")
        print("\n".join(score(read_lines(hyp), [read_lines(r) for r in ref], tgt_lang or "en").lines()))
        return
    _check_src_ref(src, ref)
    check_outputs((output, TEXT), (scores, TEXT), inputs=(src, *(ref or []), glossary))
    from mt.core.scoring import score
    from mt.decode.confidence_fit import write_scores
    from mt.decode.evaluate import translate_test
    from mt.text.files import glossary_use, read_terms
    from mt.text.texts import TermCount

    terms = read_terms(glossary, model.engine, glossary_mode)
    translator = model.load()
    sources, references = _held_out(src, ref, config, set_, translator, "test")
    split = decode.pop("split_sentences", False)  # a test set's lines are aligned with its references' lines
    decode = decoding(translator, decode)
    count = TermCount(translator, decode, split, glossary_use(terms, translator, glossary_mode)) if split or terms \
        else None
    hypotheses = translate_test(translator, sources, decode, output, count)
    print("\n".join(score(hypotheses, references, translator.config.data.tgt_lang).lines()))
    if terms is not None:
        print(count)
    if scores is not None:
        print(write_scores(scores, sources, hypotheses, references, translator))


def _check_src_ref(src: Path | None, ref: list[Path] | None) -> None:
    if src is not None and not ref:
        raise MtError("--src needs at least one --ref")


def _held_out(src: Path | None, ref: list[Path] | None, config: list[Path] | None, sets: list[str] | None,
              translator, split: str) -> tuple[list[str], list[list[str]]]:
    """--src and --ref, or the test (or dev) set of --config, or else of the model's own config."""
    from mt.decode.evaluate import read_held_out, read_test_files

    if src is not None:
        return read_test_files(src, ref)
    return read_held_out(_load(config, sets).data if config else translator.config.data, split)


@app.command()
@decode_options
@model_options
def confidence(config: Annotated[Optional[list[Path]], typer.Option(
                   "--config", "-c", help="Take the dev set from this config instead of the checkpoint's.")] = None,
               set_: SetOption = None,
               src: Annotated[Optional[Path], typer.Option("--src", help="Dev source file.")] = None,
               ref: Annotated[Optional[list[Path]], typer.Option("--ref", help="Its reference file (repeatable).")]
               = None,
               model: ModelChoice | None = None, decode: dict | None = None):
    """Fit a checkpoint's confidence estimator: translate a dev set (the config's, or --src/--ref), and learn to
    predict each translation's chrF from the model's own signals. It is written beside the checkpoint
    (best.pt → best.confidence.json); `mt export --ctranslate2` takes it along."""
    _check_src_ref(src, ref)
    if model.engine != "mt" or len(model.checkpoints or []) > 1:
        raise MtError("mt confidence fits the estimator of one checkpoint (engine mt); an export takes its "
                      "checkpoint's")
    from mt.decode.confidence import ESTIMATOR
    from mt.decode.confidence_fit import fit_confidence
    from mt.exchange.checkpoint import default_checkpoint, estimator_path

    checkpoint = model.checkpoints[0] if model.checkpoints else default_checkpoint()
    check_outputs((estimator_path(checkpoint), ESTIMATOR))
    translator = model.load()
    sources, references = _held_out(src, ref, config, set_, translator, "dev")
    decode.pop("split_sentences", None)  # a dev set's lines are aligned with its references' lines
    log.info(fit_confidence(translator, checkpoint, sources, references, decoding(translator, decode)))


def _parallel_lines(src: Path, tgt: Path) -> tuple[list[str], list[str]]:
    """The lines of --src and --tgt, one translation per source line."""
    from mt.core.lines import read_lines

    sources, targets = read_lines(src), read_lines(tgt)
    if len(sources) != len(targets):
        raise MtError(f"--src {src} has {len(sources):,} lines but --tgt {tgt} has {len(targets):,}: "
                      "give one translation per source line")
    return sources, targets


@app.command()
@model_options
def score(src: Annotated[Path, typer.Option("--src", help="Source lines.")],
          tgt: Annotated[Path, typer.Option("--tgt", help="Their translations, one per source line.")],
          output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the scores here.")] = None,
          model: ModelChoice | None = None):
    """Score given translations (forced decoding): for each pair of lines, the model's log-probability of the
    translation, end of sentence included, and its mean per token, as `LOG_PROB<TAB>MEAN`."""
    import math
    import time

    from mt.text.files import line_writer

    check_outputs((output, TEXT), inputs=(src, tgt))
    sources, targets = _parallel_lines(src, tgt)  # first: bad input is reported before the model loads
    translator = model.load()
    start = time.perf_counter()
    scores = translator.score(sources, targets)
    seconds = time.perf_counter() - start
    with line_writer(output) as write:
        for pair in scores:
            write(f"{pair.log_prob:.4f}\t{pair.mean:.4f}")
    tokens = sum(pair.tokens for pair in scores)
    if tokens:  # an empty file has none
        mean = sum(pair.log_prob for pair in scores) / tokens
        log.info(f"scored {len(scores):,} pairs, {tokens:,} tokens: {mean:.4f} log-prob per token (perplexity "
                 f"{math.exp(-mean):.2f}), {len(scores) / seconds:.1f} sentences/s")


@app.command()
@decode_options
@teacher_options
def distill(source: Annotated[list[Path], typer.Option(
                "--source", "-s", help="Source-language text, one sentence per line (repeatable): the training "
                "corpus's source side, and any monolingual text.")],
            output: Annotated[Path, typer.Option(
                "--output", "-o", help="The new corpus's directory: train.<src> and train.<tgt>. A stopped "
                "distillation there continues where it was.")],
            model: ModelChoice | None = None, decode: dict | None = None):
    """Translate source text with a teacher into a training corpus for a student: sequence-level knowledge
    distillation (beam search), or back-translation (a reverse model, --sample). Each line is translated whole."""
    from tqdm import tqdm

    from mt.core.lines import iter_file_lines
    from mt.decode.distill import corpus_files, distill as distill_corpus, recipe

    for path in source:
        if not path.is_file():
            raise MtError(f"{path}: no such file")
    translator = model.load()
    decode.pop("split_sentences", None)  # a training line is one pair, translated whole
    decode = decoding(translator, decode, split_sentences=False)
    if decode.nbest != 1:
        raise MtError("--nbest: a distillation keeps the best translation of each line")
    total = sum(1 for path in source for _ in iter_file_lines(path))
    with tqdm(total=total, unit=" lines", disable=not sys.stderr.isatty(), file=sys.stderr) as bar:
        made_by = recipe(model.checkpoints, source, decode, model.engine, translator.engine.compute_type)
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
    check_outputs((output, SHORTLIST))
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
    The directory must be new, or a previous export, which is replaced whole."""
    from mt.exchange.checkpoint import default_checkpoint

    if (ctranslate2 is None) == (huggingface is None):
        raise MtError("give one of --ctranslate2 DIR and --huggingface DIR")
    source = checkpoint or default_checkpoint()
    if shortlist is not None and ctranslate2 is None:
        raise MtError("--shortlist: a vocabulary map is CTranslate2's; give --ctranslate2 DIR")
    if ctranslate2 is not None:
        from mt.decode.ctranslate2 import vocabulary_map
        from mt.exchange.ctranslate2 import EXPORT, export_ctranslate2

        check_outputs((ctranslate2, EXPORT))
        vmap = None if shortlist is None else lambda tokenizer: vocabulary_map(shortlist, tokenizer,
                                                                               tokenizer.vocab_hash)
        export_ctranslate2(source, ctranslate2, quantization, vmap)
        log.info(f"exported {source} → {ctranslate2} (translate with: mt translate --engine ctranslate2 "
                 f"--checkpoint {ctranslate2})")
        return
    from mt.exchange.huggingface import EXPORT, export_huggingface

    check_outputs((huggingface, EXPORT))  # before the test set is translated
    test = None
    if evaluate:
        from mt.decode.evaluate import evaluate as evaluate_test_set, read_held_out
        from mt.decode.translator import load_translator

        translator = load_translator(source, "auto")
        test = evaluate_test_set(translator, *read_held_out(translator.config.data), translator.decode)
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
@served_model_options
def serve(host: Annotated[str, typer.Option("--host", help="The address to listen on: 127.0.0.1 is this machine "
                                            "only; 0.0.0.0 (or ::) every interface.")] = "127.0.0.1",
          port: Annotated[int, typer.Option("--port", help="0: any free port (the log line says which).")] = 5000,
          api_keys: Annotated[Optional[Path], typer.Option(
              "--api-keys", help="A file of API keys, one per line: /translate then needs one of them.")] = None,
          glossary: Annotated[Optional[Path], typer.Option(
              "--glossary", help="The server's glossary (SOURCE<TAB>TARGET lines): its terms hold in every "
              "translation; a request's own glossary is added to it (docs/serving.md#glossaries).")] = None,
          glossary_mode: GlossaryModeOption = "hard",
          suggestions: Annotated[Optional[Path], typer.Option(
              "--suggestions", help="Take suggestions (LibreTranslate's POST /suggest) and keep them in this SQLite "
              "file (made where there is none): the model judges each, and an accepted one answers its source "
              "(docs/serving.md#suggestions).")] = None,
          model: ModelChoice | None = None, limits: ServeConfig | None = None, decode: dict | None = None):
    """Serve a model over HTTP: LibreTranslate's API (its clients work unchanged), mt's own API, and a page to try
    it in at /. Concurrent requests are decoded together. SIGTERM or Ctrl-C finish the requests in flight, then stop.
    Needs the serve extra (the README's set-up installs it)."""
    if any(importlib.util.find_spec(package) is None for package in ("limits", "starlette", "uvicorn")):
        raise MtError('mt serve needs the serve extra: pip install -e ".[serve]"', exit_code=1)
    from mt.serve.server import read_api_keys, serve as run_server

    limits.checked()
    keys = read_api_keys(api_keys) if api_keys else frozenset()
    from mt.text.files import read_terms

    terms = read_terms(glossary, model.engine, glossary_mode)
    # The worker thread decodes; this one only loads. CTranslate2 starts no torch team here, and its translator
    # keeps the thread count it is built with: torch's, one per core.
    with without_a_thread_team() if model.engine == "mt" else nullcontext():
        translator = model.load()
    translator.config.decode = decoding(translator, decode)  # the server's defaults
    try:
        limits.check_beam(translator.decode.beam_size)
    except MtError:
        raise MtError(f"beam {translator.decode.beam_size} (--beam, or the checkpoint's decode.beam_size): over "
                      f"--max-beam {limits.max_beam}")

    def load(checkpoint: Path):  # POST /api/model: another checkpoint, loaded as this one was
        with without_a_thread_team():
            other = replace(model, checkpoints=[checkpoint]).load()
        other.config.decode = translator.config.decode
        return other

    run_server(translator, model.engine, limits, host, port, keys, terms, glossary_mode == "soft", suggestions,
               load if model.engine == "mt" else None)


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
