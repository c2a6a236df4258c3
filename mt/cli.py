"""The `mt` command line: parses options, loads the config, calls one function per command.

A user's mistake (MtError) is printed as one line on stderr with a non-zero exit; `--debug` shows the traceback.
Each command imports what it needs when it runs, so that `mt --help` answers without loading torch.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.errors import MtError

CHUNK_LINES = 2000  # lines read, sorted by length and translated together when streaming

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and use Transformer translation models (Attention Is All You Need).")

ConfigOption = Annotated[list[Path], typer.Option(
    "--config", "-c", help="YAML config; repeat to layer files (later ones override earlier ones).")]
SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override one config key, e.g. --set train.max_steps=200 (repeatable).")]
DeviceOption = Annotated[Optional[str], typer.Option("--device", help="auto | cpu | cuda")]
CheckpointOption = Annotated[Optional[Path], typer.Option(
    "--checkpoint", help="Default: best.pt of the most recently trained run under runs/.")]
BeamOption = Annotated[Optional[int], typer.Option(
    "--beam", min=1, help="Beam size; 1 is greedy search. Default: the checkpoint's decode.beam_size.")]
AlphaOption = Annotated[Optional[float], typer.Option(
    "--alpha", min=0.0, help="GNMT length penalty: score = log p / ((5 + length) / 6) ** alpha.")]
MaxLenAOption = Annotated[Optional[float], typer.Option(
    "--max-len-a", min=0.0, help="Outputs may have up to a · source length + b tokens (default: checkpoint's).")]
MaxLenBOption = Annotated[Optional[int], typer.Option("--max-len-b", min=1, help="See --max-len-a.")]
NoRepeatOption = Annotated[Optional[int], typer.Option(
    "--no-repeat-ngram", min=0, help="No n-gram of this many tokens twice in an output (0: off). "
    "Default: the checkpoint's decode.no_repeat_ngram_size.")]


@app.callback()
def options(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False) -> None:
    """Options for every command."""


def _load(configs: list[Path], sets: list[str] | None, device: str | None = None, run_dir: str | None = None):
    from mt.config import load_config

    overrides = list(sets or [])
    if device:
        overrides.append(f"train.device={device}")
    return load_config(configs, overrides, run_dir or "")


@app.command()
def train(config: ConfigOption, set_: SetOption = None, device: DeviceOption = None,
          resume: Annotated[bool, typer.Option("--resume", help="Continue the run from its last.pt.")] = False,
          run_dir: Annotated[Optional[str], typer.Option("--run-dir", help="Default: runs/<config name>.")] = None):
    """Train a model: tokenizer (if missing) → data → Transformer → checkpoints in the run directory."""
    from mt.train import train as run_training

    run_training(_load(config, set_, device, run_dir), resume=resume)


@app.command()
def prepare(config: ConfigOption, set_: SetOption = None,
            run_dir: Annotated[Optional[str], typer.Option("--run-dir", help="Default: runs/<config name>.")] = None):
    """Prepare a run's data without training: tokenizer (if missing) and the cached token ids."""
    from mt.train import prepare_only

    prepare_only(_load(config, set_, run_dir=run_dir))


@app.command()
def average(run_dir: Annotated[Path, typer.Argument(help="A run directory (holding checkpoints/step-*.pt).")],
            last: Annotated[int, typer.Option("--last", min=1, help="How many of the newest checkpoints.")] = 5,
            output: Annotated[Optional[Path], typer.Option(
                "--output", "-o", help="Default: RUN_DIR/checkpoints/average.pt")] = None):
    """Average the weights of a run's last N checkpoints into one checkpoint for translate and evaluate."""
    from mt.checkpoint import average_checkpoints, checkpoint_dir, save_checkpoint

    state = average_checkpoints(run_dir, last)
    output = output or checkpoint_dir(run_dir) / "average.pt"
    save_checkpoint(state, output)
    print(f"averaged {', '.join(state['averaged'])} → {output}")


@app.command()
def translate(text: Annotated[Optional[list[str]], typer.Argument(help="Sentences to translate.")] = None,
              input: Annotated[Optional[Path], typer.Option("--input", "-i", help="One sentence per line.")] = None,
              output: Annotated[Optional[Path], typer.Option("--output", "-o")] = None,
              checkpoint: CheckpointOption = None, device: DeviceOption = "auto",
              beam: BeamOption = None, alpha: AlphaOption = None, max_len_a: MaxLenAOption = None,
              max_len_b: MaxLenBOption = None, no_repeat_ngram: NoRepeatOption = None,
              nbest: Annotated[int, typer.Option("--nbest", min=1, help="Print the N best translations of "
                                                 "each line as: LINE ||| TRANSLATION ||| SCORE")] = 1,
              engine: Annotated[str, typer.Option("--engine", help="mt, or ctranslate2 to use a model made by "
                                                  "`mt export --ctranslate2 DIR` (--checkpoint DIR; default: "
                                                  "the latest run's ctranslate2/).")] = "mt",
              attention: Annotated[Optional[Path], typer.Option(
                  "--attention", help="Draw the cross-attention of the translation of one sentence into this PNG: "
                  "a panel per decoder layer, heads averaged.")] = None,
              layer: Annotated[Optional[int], typer.Option("--layer", help="With --attention: this layer only.")]
              = None,
              head: Annotated[Optional[int], typer.Option("--head", help="With --attention: this head only "
                                                          "(of --layer, default the last).")] = None):
    """Translate sentences given as arguments, in --input FILE, or on stdin (one per line).

    Input is read and translated in chunks, and each chunk's lines are written as soon as they are done.
    """
    from tqdm import tqdm

    from mt.translate import translate_stream

    if text and input:
        raise MtError("give sentences as arguments or --input FILE, not both")
    if attention is not None:
        if len(text or []) != 1 or engine != "mt" or nbest != 1:
            raise MtError("--attention draws one translation: give one sentence as an argument (engine mt, nbest 1)")
    lines, chunk = _input_lines(text, input)
    overrides = {"beam_size": beam, "alpha": alpha, "nbest": nbest, "max_len_a": max_len_a, "max_len_b": max_len_b,
                 "no_repeat_ngram_size": no_repeat_ngram}
    results = translate_stream(_translator(engine, checkpoint, device, overrides), lines, chunk)
    # A progress bar for a person watching the terminal while the translations go to a file or a pipe.
    bar = sys.stderr.isatty() and (output is not None or not sys.stdout.isatty()) and not text
    with _line_writer(output) as write:
        for i, hyps in enumerate(tqdm(results, unit=" lines", disable=not bar, file=sys.stderr)):
            if nbest == 1:
                write(hyps[0].text)
            else:
                for t in hyps:
                    write(f"{i} ||| {t.text} ||| {t.score:.4f}")
    if attention is not None:
        _draw_attention(checkpoint, device, text[0], hyps[0].text, attention, layer, head)


def _draw_attention(checkpoint, device, source: str, translation: str, output: Path, layer, head) -> None:
    """The cross-attention of `translation` (its pieces re-encoded from the text) given `source`."""
    from mt.batching import pad_ids
    from mt.checkpoint import default_checkpoint, load_model
    from mt.device import resolve_device
    from mt.plots import Pieces, plot_attention
    from mt.tokenizer import BOS

    torch_device = resolve_device(device)
    model, tok, _, _ = load_model(checkpoint or default_checkpoint(), torch_device)
    src_ids = tok.encode_src([source])[0]                                 # pieces … EOS
    tgt_ids = tok.encode_tgt([translation])[0][1:]                        # pieces … EOS (BOS dropped)
    src, tgt_input = pad_ids([src_ids]), pad_ids([[BOS] + tgt_ids[:-1]])  # the decoder reads BOS pieces …
    weights = model.cross_attention(src.to(torch_device), tgt_input.to(torch_device))[0].cpu()  # [L, H, T, S]
    if head is not None and layer is None:
        layer = weights.size(0)
    src_pieces = Pieces([tok.src.id_to_piece(i) for i in src_ids], src_ids)
    tgt_pieces = Pieces([tok.tgt.id_to_piece(i) for i in tgt_ids], tgt_ids)
    plot_attention(weights, src_pieces, tgt_pieces, output, layer, head)
    print(f"attention map → {output}", file=sys.stderr)


@app.command()
def plot(run_dir: Annotated[Path, typer.Argument(help="A run directory (with its log.jsonl).")],
         output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Default: RUN_DIR/training.png")]
         = None):
    """Draw a run's training curves: loss (training and dev), learning rate, dev BLEU/chrF and tokens/s."""
    from mt.plots import plot_training

    output = output or run_dir / "training.png"
    plot_training(run_dir, output)
    print(f"training curves → {output}")


@app.command()
def info(checkpoint: Annotated[Path, typer.Argument(help="A checkpoint file.")]):
    """Describe a checkpoint: step, parameters, vocabularies, dev scores with their sacreBLEU signature, config."""
    import textwrap

    import torch
    import yaml

    from mt.checkpoint import load_model

    model, tok, _, state = load_model(checkpoint, torch.device("cpu"))
    dev = state.get("dev") or {}
    vocab = (f"{tok.src_vocab_size:,} pieces, joint" if tok.joint
             else f"{tok.src_vocab_size:,} source and {tok.tgt_vocab_size:,} target pieces")
    averaged = f" (average of {', '.join(state['averaged'])})" if "averaged" in state else ""
    print(f"checkpoint: {checkpoint}{averaged}")
    print(f"step: {state.get('step', 0):,}")
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
    print(f"vocabulary: {vocab} (hash {state['tokenizer']['vocab_hash']})")
    if "dev_bleu" in dev:
        print(f"dev: BLEU {dev['dev_bleu']:.2f}, chrF {dev['dev_chrf']:.2f}, loss {dev['dev_loss']:.3f}, "
              f"perplexity {dev['dev_ppl']:.1f} (greedy search)")
        print(f"  BLEU signature: {dev.get('bleu_signature', 'not recorded by this checkpoint')}")
        print(f"  chrF signature: {dev.get('chrf_signature', 'not recorded by this checkpoint')}")
    else:
        print("dev: not validated at this checkpoint")
    print("config:\n" + textwrap.indent(yaml.safe_dump(state["config"], sort_keys=False, allow_unicode=True), "  "),
          end="")


def _input_lines(text: list[str] | None, input: Path | None):
    """The lines to translate and how many to translate at a time: the arguments all at once, a file or
    piped stdin in chunks, and a person typing at a terminal line by line."""
    from mt.lines import iter_file_lines, iter_lines

    if text:
        return text, len(text)
    if input is not None:
        return iter_file_lines(input), CHUNK_LINES  # opened now: a missing file is reported first
    if sys.stdin.isatty():
        print("reading sentences from stdin (Ctrl-D to end)", file=sys.stderr)
        return iter_lines(sys.stdin.buffer, "stdin"), 1
    return iter_lines(sys.stdin.buffer, "stdin"), CHUNK_LINES


@app.command()
def evaluate(checkpoint: CheckpointOption = None,
             config: Annotated[Optional[list[Path]], typer.Option(
                 "--config", "-c", help="Take the test set from this config instead of the checkpoint's.")] = None,
             set_: SetOption = None,
             src: Annotated[Optional[Path], typer.Option("--src", help="Source file to translate.")] = None,
             ref: Annotated[Optional[list[Path]], typer.Option("--ref", help="Reference file (repeatable).")] = None,
             hyp: Annotated[Optional[Path], typer.Option("--hyp", help="Score this output; translate nothing.")] = None,
             tgt_lang: Annotated[Optional[str], typer.Option("--tgt-lang", help="For --hyp (default en).")] = None,
             output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Save the translations.")] = None,
             device: DeviceOption = "auto", beam: BeamOption = None, alpha: AlphaOption = None,
             max_len_a: MaxLenAOption = None, max_len_b: MaxLenBOption = None,
             no_repeat_ngram: NoRepeatOption = None):
    """Translate a test set (the config's, or --src/--ref) and print sacreBLEU BLEU and chrF with signatures."""
    from mt.evaluate import score
    from mt.lines import read_lines

    if hyp is not None:
        if not ref:
            raise MtError("--hyp needs at least one --ref")
        scores = score(read_lines(hyp), [read_lines(r) for r in ref], tgt_lang or "en")
    else:
        overrides = {"beam_size": beam, "alpha": alpha, "max_len_a": max_len_a, "max_len_b": max_len_b,
                     "no_repeat_ngram_size": no_repeat_ngram}
        scores = _translate_test_set(checkpoint, config, set_, src, ref, output, device, overrides)
    print("\n".join(scores.lines()))


def _translate_test_set(checkpoint, configs, sets, src, refs, output, device, overrides: dict):
    from mt.checkpoint import default_checkpoint, load_model
    from mt.data import read_corpus
    from mt.lines import read_lines
    from mt.device import resolve_device
    from mt.evaluate import score
    from mt.translate import translate_lines

    torch_device = resolve_device(device)
    model, tok, model_config, _ = load_model(checkpoint or default_checkpoint(), torch_device)
    data = _load(configs, sets).data if configs else model_config.data
    if src is not None:
        if not refs:
            raise MtError("--src needs at least one --ref")
        sources, references = read_lines(src), [read_lines(r) for r in refs]
    else:
        test = read_corpus(data.test, data, "test")
        sources, references = test["src"], [test["tgt"]]
    decode = _decode_options(model_config.decode, overrides)
    hypotheses = translate_lines(model, tok, sources, decode, torch_device)
    if output is not None:
        with _line_writer(output) as write:
            for line in hypotheses:
                write(line)
    return score(hypotheses, references, data.tgt_lang)


@app.command()
def export(ctranslate2: Annotated[Path, typer.Option("--ctranslate2", help="Directory to write the model to.")],
           checkpoint: CheckpointOption = None,
           quantization: Annotated[Optional[str], typer.Option(
               "--quantization", help="e.g. int8, int8_float32, float16 (default: keep float32).")] = None):
    """Convert a checkpoint and its SentencePiece model into a CTranslate2 model directory."""
    from mt.checkpoint import default_checkpoint
    from mt.export import export_ctranslate2

    source = checkpoint or default_checkpoint()
    export_ctranslate2(source, ctranslate2, quantization)
    print(f"exported {source} → {ctranslate2} (translate with: mt translate --engine ctranslate2 "
          f"--checkpoint {ctranslate2})")


def _translator(engine: str, checkpoint: Path | None, device: str, overrides: dict):
    """A function translating a chunk of lines with the chosen engine and decode options."""
    from mt.checkpoint import default_checkpoint, load_model
    from mt.device import resolve_device
    from mt.translate import translate_nbest

    torch_device = resolve_device(device)
    if engine == "ctranslate2":
        from mt.export import CTranslate2Engine

        model_dir = checkpoint or default_checkpoint().parent.parent / "ctranslate2"
        ct2 = CTranslate2Engine(model_dir, torch_device)
        decode = _decode_options(ct2.decode, overrides)
        return lambda lines, first_line: ct2.translate_nbest(lines, decode, first_line)
    if engine != "mt":
        raise MtError(f"--engine {engine}: expected mt or ctranslate2")
    model, tok, config, _ = load_model(checkpoint or default_checkpoint(), torch_device)
    decode = _decode_options(config.decode, overrides)
    return lambda lines, first_line: translate_nbest(model, tok, lines, decode, torch_device, first_line)


def _decode_options(decode, overrides: dict):
    """The checkpoint's decode settings with the command line's options (those given) on top."""
    import dataclasses

    given = {k: v for k, v in overrides.items() if v is not None}
    decode = dataclasses.replace(decode, **{"nbest": 1, **given})
    if decode.nbest > decode.beam_size:
        raise MtError(f"--nbest {decode.nbest}: cannot exceed the beam size ({decode.beam_size}); raise --beam")
    return decode


@contextmanager
def _line_writer(output: Path | None):
    """A function that writes one line: to stdout at once, or into `output`, which appears (atomically)
    only when every line is written."""
    if output is None:
        def write(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

        yield write
    else:
        from mt.atomic import atomic_open

        with atomic_open(output) as f:
            yield lambda line: f.write((line + "\n").encode("utf-8"))


def main() -> None:
    """The `mt` command. A user's mistake, in a config or data file or on the command line, is printed as one
    line with a non-zero exit; `--debug` shows the traceback instead."""
    try:
        status = app(standalone_mode=False, prog_name="mt")  # Ctrl-C returns 130; a closed pipe exits quietly
    except (MtError, typer.TyperException) as e:
        if "--debug" in sys.argv:
            raise
        message = str(e) if isinstance(e, MtError) else e.format_message()
        if message:  # `mt` alone has shown its help and has nothing to add
            print(f"mt: error: {message}", file=sys.stderr)
        sys.exit(e.exit_code)
    sys.exit(status or 0)
