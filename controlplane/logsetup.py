"""Structured logging: one JSON object per event in production, quiet console in the demo."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, object] = {
            "at": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        event.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            event["exc"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


def setup_logging(level: int = logging.INFO, log_file: Path | None = None) -> None:
    """JSON events to ``log_file`` (or stderr); silence chatty third-party loggers in one place."""
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    handler: logging.Handler
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("cmdstanpy", "prophet", "apscheduler", "alembic", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
