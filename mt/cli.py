"""The `mt` command line: parses options, loads the config, calls one function per command.

A user's mistake (MtError) is printed as one line on stderr with a non-zero exit; `--debug` shows the traceback.
Each command imports what it needs when it runs, so that `mt --help` answers without loading torch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.errors import MtError

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
def tokenizer(config: ConfigOption, set_: SetOption = None,
              run_dir: Annotated[Optional[str], typer.Option("--run-dir")] = None):
    """Train the SentencePiece tokenizer of a run on its own."""
    from mt.train import train_tokenizer_only

    train_tokenizer_only(_load(config, set_, run_dir=run_dir))


@app.command()
def translate(text: Annotated[Optional[list[str]], typer.Argument(help="Sentences to translate.")] = None,
              input: Annotated[Optional[Path], typer.Option("--input", "-i", help="One sentence per line.")] = None,
              output: Annotated[Optional[Path], typer.Option("--output", "-o")] = None,
              checkpoint: CheckpointOption = None, device: DeviceOption = "auto",
              beam: BeamOption = None, alpha: AlphaOption = None,
              nbest: Annotated[int, typer.Option("--nbest", min=1, help="Print the N best translations of "
                                                 "each line as: LINE ||| TRANSLATION ||| SCORE")] = 1):
    """Translate sentences given as arguments, in --input FILE, or on stdin (one per line)."""
    from mt.checkpoint import default_checkpoint, load_model
    from mt.data import read_lines
    from mt.device import resolve_device
    from mt.translate import translate_nbest

    if text and input:
        raise MtError("give sentences as arguments or --input FILE, not both")
    lines = list(text) if text else read_lines(input) if input else _stdin_lines()
    torch_device = resolve_device(device)
    model, tok, config, _ = load_model(checkpoint or default_checkpoint(), torch_device)
    decode = _decode_options(config.decode, beam, alpha, nbest)
    results = translate_nbest(model, tok, lines, decode, torch_device)
    if nbest == 1:
        _write_lines([best[0].text for best in results], output)
    else:
        _write_lines([f"{i} ||| {t.text} ||| {t.score:.4f}" for i, hyps in enumerate(results) for t in hyps], output)


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
             device: DeviceOption = "auto", beam: BeamOption = None, alpha: AlphaOption = None):
    """Translate a test set (the config's, or --src/--ref) and print sacreBLEU BLEU and chrF with signatures."""
    from mt.data import read_lines
    from mt.evaluate import score

    if hyp is not None:
        if not ref:
            raise MtError("--hyp needs at least one --ref")
        scores = score(read_lines(hyp), [read_lines(r) for r in ref], tgt_lang or "en")
    else:
        scores = _translate_test_set(checkpoint, config, set_, src, ref, output, device, beam, alpha)
    print("\n".join(scores.lines()))


def _translate_test_set(checkpoint, configs, sets, src, refs, output, device, beam, alpha):
    from mt.checkpoint import default_checkpoint, load_model
    from mt.data import read_corpus, read_lines
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
    decode = _decode_options(model_config.decode, beam, alpha, nbest=1)
    hypotheses = translate_lines(model, tok, sources, decode, torch_device)
    if output is not None:
        _write_lines(hypotheses, output)
    return score(hypotheses, references, data.tgt_lang)


def _decode_options(decode, beam: int | None, alpha: float | None, nbest: int):
    """The checkpoint's decode settings with the command line's options on top."""
    import dataclasses

    beam = beam or decode.beam_size
    if nbest > beam:
        raise MtError(f"--nbest {nbest}: cannot exceed the beam size ({beam}); raise --beam")
    return dataclasses.replace(decode, beam_size=beam, alpha=decode.alpha if alpha is None else alpha, nbest=nbest)


def _stdin_lines() -> list[str]:
    if sys.stdin.isatty():
        print("reading sentences from stdin (Ctrl-D to end)", file=sys.stderr)
    return [line.rstrip("\r\n") for line in sys.stdin]


def _write_lines(lines: list[str], output: Path | None) -> None:
    if output is None:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    else:
        from mt.atomic import atomic_write_lines

        atomic_write_lines(output, lines)


def main() -> None:
    try:
        app()
    except MtError as e:
        if "--debug" in sys.argv:
            raise
        print(f"mt: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
