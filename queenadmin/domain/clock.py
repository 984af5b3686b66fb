"""The one source of time for the domain: ``now()`` (aware, UTC).

Tests move it with time-machine; nothing in ``domain/`` reads the system
clock any other way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def now() -> datetime:
    return datetime.now(UTC)


def align(moment: datetime, seconds: int) -> datetime:
    """The start of the ``seconds``-long bucket, counted from the Unix
    epoch, that holds ``moment`` (the samplers' ticks and the buckets of
    their series)."""
    elapsed = int((moment - _EPOCH).total_seconds())
    return _EPOCH + timedelta(seconds=elapsed - elapsed % seconds)


def iso_jsonb(moment: datetime | None) -> str | None:
    """Render like PostgreSQL's ``to_jsonb(timestamptz)``: KV answers use it.

    ``2026-10-08T10:00:00.123+00:00``: the fraction loses trailing zeros and
    disappears when it is zero; the year has four digits (``0197``), as
    PostgreSQL writes it.
    """
    if moment is None:
        return None
    moment = moment.astimezone(UTC)
    text = f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += ("." + f"{moment.microsecond:06d}").rstrip("0")
    return text + "+00:00"


def iso_millis_z(moment: datetime) -> str:
    """Render as ``YYYY-MM-DDTHH:MM:SS.fffZ`` (Queen's status answers, streams)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def iso_micros_z(moment: datetime | None) -> str | None:
    """Render as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (console lists, timers)."""
    if moment is None:
        return None
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    # ``isoformat`` (in C) writes four-digit years and, with the timespec,
    # six fraction digits; only its "+00:00" is replaced. A pop of 100
    # renders 100 of these: strftime was 9% of pop-100's serve CPU.
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"
