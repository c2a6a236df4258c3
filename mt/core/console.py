"""What mt tells the person running it. Results (translations, scores, `mt info`) go to stdout; everything else
(progress, reports, warnings) goes through the standard `logging` module to stderr, so that `mt translate … >
out.txt` and pipes carry translations only.

Modules log to loggers under "mt" (`logging.getLogger(__name__)`); the command line sets how much is shown.
"""

from __future__ import annotations

import logging
import os
import sys

from tqdm import tqdm

VERBOSITY = {"quiet": logging.WARNING, "normal": logging.INFO, "verbose": logging.DEBUG}


class _Formatter(logging.Formatter):
    """Progress lines as they are; "warning: …" and "error: …" named as such; in a DDP run, the process's rank."""

    def __init__(self, rank: int):
        super().__init__()
        self.rank = rank

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno >= logging.WARNING:
            text = f"{record.levelname.lower()}: {text}"
        return f"[rank {self.rank}] {text}" if self.rank else text


class _BarFriendlyHandler(logging.StreamHandler):
    """Writes each record as a line on stderr above any progress bar (tqdm redraws the bar below it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging's own contract: report and carry on
            self.handleError(record)


def setup_logging(verbosity: str = "normal") -> None:
    """Show records of the chosen verbosity (a VERBOSITY key) on stderr. Processes other than the main one of a
    DDP run (torchrun sets RANK) show warnings and errors only, each prefixed with their rank."""
    rank = int(os.environ.get("RANK", "0"))
    handler = _BarFriendlyHandler()
    handler.setFormatter(_Formatter(rank))
    logger = logging.getLogger("mt")
    logger.handlers = [handler]
    logger.setLevel(VERBOSITY[verbosity] if rank == 0 else max(VERBOSITY[verbosity], logging.WARNING))
    logger.propagate = False
