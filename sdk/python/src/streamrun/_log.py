"""Logs into the host's: records go to stderr as JSON lines in the shape
Go's log/slog writes ({"time", "level", "msg", attributes...}); the host
reads the plugin's stderr and logs each such line again as its own record,
at its level, with its attributes, tagged with the plugin and instance.
Other lines on stderr (print output, which the SDK sends there too, and
tracebacks) reach the host's log as text at INFO."""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from datetime import datetime, timezone
from typing import IO, Optional

#: The host's log level for the plugin, in slog's words (DEBUG, INFO,
#: WARN, ERROR), so the plugin does not format what the host would drop.
ENV_LOG_LEVEL = "STREAMRUN_PLUGIN_LOG_LEVEL"

# The attributes every LogRecord has; the rest came from extra={...}.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def slog_level(levelno: int) -> str:
    """slog's name for a logging level: DEBUG, INFO, WARN, ERROR, or an
    offset from one of them (ERROR+4 for CRITICAL)."""
    for base, name in ((40, "ERROR"), (30, "WARN"), (20, "INFO"), (10, "DEBUG")):
        if levelno >= base:
            # slog's levels are 4 apart where logging's are 10 apart.
            off = (levelno - base) * 4 // 10
            return name if off == 0 else f"{name}+{off}"
    return f"DEBUG-{(10 - levelno) * 4 // 10}"


def python_level(name: str) -> int:
    """The logging level of an slog level name; INFO when unknown."""
    name = name.strip().upper()
    base, _, off = name.replace("-", "+-").partition("+")
    levels = {"DEBUG": 10, "INFO": 20, "WARN": 30, "WARNING": 30, "ERROR": 40}
    if base not in levels:
        return logging.INFO
    try:
        delta = int(off) if off else 0
    except ValueError:
        delta = 0
    return levels[base] + delta * 10 // 4


class SlogFormatter(logging.Formatter):
    """Formats a record as one slog JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="microseconds"),
            "level": slog_level(record.levelno),
            "msg": record.getMessage(),
        }
        if record.name and record.name != "root":
            out["logger"] = record.name
        for k, v in record.__dict__.items():
            if k not in _STANDARD and not k.startswith("_") and k not in out:
                out[k] = v
        if record.exc_info and record.exc_info[0] is not None:
            out["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
            out["stack"] = "".join(traceback.format_exception(*record.exc_info))
        elif record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, default=_jsonable, ensure_ascii=False)


def _jsonable(v: object) -> object:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return str(v)


class _LineHandler(logging.StreamHandler):
    """Writes each record as one line with a single write, so that lines
    from several threads never interleave."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
            self.acquire()
            try:
                self.stream.write(line)
                self.stream.flush()
            finally:
                self.release()
        except Exception:
            self.handleError(record)


def setup(stream: Optional[IO[str]] = None, level: Optional[str] = None) -> None:
    """Points the root logger at stream (default stderr) as slog JSON, at
    the host's level, replacing its handlers. Warnings go to logging too."""
    h = _LineHandler(stream or sys.stderr)
    h.setFormatter(SlogFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(h)
    root.setLevel(python_level(level if level is not None else os.environ.get(ENV_LOG_LEVEL, "INFO")))
    logging.captureWarnings(True)
