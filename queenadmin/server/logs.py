"""Logging of a serving process: text for people, JSON lines for collectors.

``QUEENADMIN_LOG_FORMAT`` picks ``text`` (the default) or ``json``;
``QUEENADMIN_LOG_LEVEL`` the level of our own loggers (default ``INFO``),
``QUEENADMIN_UVICORN_LOG_LEVEL`` uvicorn's (queenadmin/conf.py; settings.py
passes them in, before ``conf.settings`` can be read).
The same configuration goes to Django (``settings.LOGGING``) and to uvicorn
(``serve`` passes it as uvicorn's ``log_config``, which every worker process
applies), so ``serve``'s own lines, the access log and errors all come out
in one format.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

#: The access log's record arguments, in uvicorn's order.
_ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and for the
    access log the request's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            line.update(zip(_ACCESS_FIELDS, record.args, strict=True))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def logging_config(
    *, log_format: str, level: str, uvicorn_level: str = "WARNING", uvicorn: bool = False, access_log: bool = False
) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dictionary for the current environment.

    ``uvicorn`` adds uvicorn's loggers (``serve`` passes this one to uvicorn;
    Django's own configuration leaves them alone, or it would turn the
    access log back on in each worker).
    """
    level = level.upper()
    json_lines = log_format.strip().lower() == "json"
    formatters: dict[str, Any] = {
        "plain": {"format": "%(message)s"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": JsonFormatter},
    }
    handlers = {
        "console": {"class": "logging.StreamHandler", "formatter": "json" if json_lines else "text"},
        # serve's own lines (banner, "serving on", "stopped") read as sentences.
        "plain": {"class": "logging.StreamHandler", "formatter": "json" if json_lines else "plain"},
    }
    loggers: dict[str, Any] = {
        "queenadmin": {"handlers": ["console"], "level": level},
        "queenadmin.serve": {"handlers": ["plain"], "level": "INFO", "propagate": False},
        "django.request": {"handlers": ["console"], "level": "ERROR"},
    }
    if uvicorn:
        loggers["uvicorn.error"] = {
            "handlers": ["console"],
            "level": uvicorn_level.upper(),
            "propagate": False,
        }
        loggers["uvicorn.access"] = {
            "handlers": ["console"] if access_log else [],
            "level": "INFO",
            "propagate": False,
        }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": formatters,
        "handlers": handlers,
        "loggers": loggers,
    }
