"""Process logging from ``settings.logging``, with the current request id on every record."""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar, Token
from datetime import UTC, datetime

from genenv.settings import LoggingSettings

_request_id: ContextVar[str | None] = ContextVar("genenv_request_id", default=None)
_HANDLER_NAME = "genenv"


def current_request_id() -> str | None:
    """The request id of the request being handled (None outside a request)."""
    return _request_id.get()


def set_request_id(value: str | None) -> Token[str | None]:
    """Bind a request id to the current context; returns a token for ``reset_request_id``."""
    return _request_id.set(value)


def reset_request_id(token: Token[str | None]) -> None:
    """Restore the request id bound before ``set_request_id``."""
    _request_id.reset(token)


class _RequestIdFilter(logging.Filter):
    """Adds ``record.request_id`` so formatters can print it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _request_id.get() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as a JSON line."""
        doc = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        if record.exc_info:
            doc["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def setup_logging(settings: LoggingSettings) -> None:
    """Install one stderr handler on the root logger (idempotent; replaces an earlier genenv handler)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(_RequestIdFilter())
    if settings.json_logs:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    root.addHandler(handler)
    root.setLevel(settings.level)
    # uvicorn installs its own handlers unless told otherwise; route its records through ours.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
