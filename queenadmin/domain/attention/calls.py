"""The attention list and the thresholds as they apply: reads, no locks.

``needs_attention`` judges every queue in four statements whatever their
number: the stored thresholds, the sampler's newest tick, the facts of
every queue's window (the attention store: its rows at the window's last,
first and middle ticks), and the consumer heartbeats (one KV page,
``domain.supervision``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from queenadmin.conf import settings
from queenadmin.domain.attention.ops import (
    DEFAULTS,
    FIELDS,
    KINDS,
    Concern,
    Kind,
    Override,
    QueueFacts,
    Thresholds,
    concern,
    kinds_of,
)
from queenadmin.domain.attention.store import FactsRow, ThresholdRow, store
from queenadmin.domain.queues.history import latest_sample_at
from queenadmin.domain.supervision import Heartbeats, heartbeat_readers, supervision_heartbeats
from queenadmin.errors import QueueNotFound
from queenadmin.models import Queue

#: Queues the list holds at most (the most urgent first); ``total`` counts all.
ATTENTION_LIMIT = 25
#: The name the stored defaults go by in the table of thresholds.
DEFAULTS_KEY = ""


@dataclass(frozen=True)
class QueueAttention:
    """A queue that needs attention, and why."""

    queue: str
    kinds: tuple[Kind, ...]
    thresholds: Thresholds
    facts: QueueFacts

    @property
    def concerns(self) -> tuple[Concern, ...]:
        """Each reason worded (only the queues a page shows are)."""
        return tuple(concern(k, self.facts, self.thresholds) for k in self.kinds)


@dataclass(frozen=True)
class AttentionList:
    """The queues that need attention, most urgent first."""

    items: tuple[QueueAttention, ...]
    #: Queues that need attention, the ones past ``ATTENTION_LIMIT`` included.
    total: int
    #: Queues judged: those with a sampler row in their window.
    judged: int
    #: Per queue judged: "no-reader" or "stalled" where one holds ("" else),
    #: for the queue tables' state column.
    reading: Mapping[str, str]
    #: The defaults every queue without its own thresholds is judged by.
    defaults: Thresholds


def override_of(row: ThresholdRow | None) -> Override:
    """The thresholds a stored row sets (none: no row)."""
    if row is None:
        return Override()
    return Override(*(getattr(row, name) for name in FIELDS))


def attention_defaults(rows: list[ThresholdRow] | None = None) -> Thresholds:
    """The defaults as stored (the row of queue ""), over ``ops.DEFAULTS``."""
    if rows is None:
        stored = store().threshold_of(DEFAULTS_KEY)
    else:
        stored = next((r for r in rows if r.queue == DEFAULTS_KEY), None)
    return override_of(stored).over(DEFAULTS)


@dataclass(frozen=True)
class QueueThresholds:
    """One queue's thresholds (or the defaults, ``queue`` ""): what is
    stored, and what applies."""

    queue: str
    stored: Override
    applied: Thresholds
    #: What a field left empty takes: the defaults (for the defaults, ``ops.DEFAULTS``).
    inherited: Thresholds
    updated_at: datetime | None


def attention_thresholds(*, queue: str) -> QueueThresholds:
    """The thresholds of ``queue`` ("" for the defaults): stored and applied.

    Raises ``QueueNotFound`` for a queue that does not exist.
    """
    if queue != DEFAULTS_KEY and ("\x00" in queue or not Queue.objects.filter(name=queue).exists()):
        raise QueueNotFound(f"no queue {queue}")
    base = DEFAULTS if queue == DEFAULTS_KEY else attention_defaults()
    row = store().threshold_of(queue)
    stored = override_of(row)
    return QueueThresholds(queue, stored, stored.over(base), base, None if row is None else row.updated_at)


def _ticks(minutes: int, interval: int) -> tuple[timedelta, timedelta]:
    """How far before the last tick a window of ``minutes`` starts, and its
    middle, each a whole number of the sampler's ticks."""
    seconds = minutes * 60
    return timedelta(seconds=seconds - seconds % interval), timedelta(seconds=seconds // 2 - seconds // 2 % interval)


def _facts(row: FactsRow, start: datetime, last: datetime) -> QueueFacts:
    (
        name,
        namespace,
        task,
        created,
        _,
        depth,
        age,
        popped,
        completed,
        dlq,
        f_depth,
        f_popped,
        f_completed,
        f_dlq,
        m_depth,
        paused,
    ) = row
    if f_depth is not None:
        base = (f_popped or 0, f_completed or 0, f_dlq or 0)
    elif created is not None and created > start:
        # Younger than the window: everything it counted happened in it.
        base = (0, 0, 0)
    else:
        # The window's first tick was missed: what happened in it is unknown.
        base = (popped, completed, dlq)
    return QueueFacts(
        queue=name,
        namespace=namespace,
        task=task,
        first_at=start,
        last_at=last,
        popped=max(0, popped - base[0]),
        completed=max(0, completed - base[1]),
        dlq=max(0, dlq - base[2]),
        first_depth=f_depth,
        mid_depth=m_depth,
        last_depth=depth,
        last_age=age,
        popped_ever=popped,
        paused=paused,
    )


def needs_attention(
    *, now: datetime, heartbeats: Heartbeats | None = None, limit: int = ATTENTION_LIMIT
) -> AttentionList:
    """Every queue that needs attention now (``ops`` says when), most urgent
    first, at most ``limit``. ``heartbeats``: already read (the caller shows
    them too), else read here. Four statements at most: the thresholds, the
    newest tick of the sampler, every queue's facts at that tick and at its
    window's first and middle ones, the heartbeats."""
    rows = store().thresholds()
    defaults = attention_defaults(rows)
    overrides = {r.queue: override_of(r) for r in rows if r.queue != DEFAULTS_KEY}
    interval = max(1, int(settings.SAMPLER_INTERVAL_SECONDS))
    last = latest_sample_at(upto=now)
    windows = sorted({defaults.window_minutes, *(o.window_minutes for o in overrides.values() if o.window_minutes)})
    facts: list[QueueFacts] = []
    if last is not None and now - last < timedelta(minutes=windows[-1]):
        spans = {w: _ticks(w, interval) for w in windows}
        # A sampler that stopped longer ago than a queue's window says
        # nothing of the queue now.
        current = {w: now - last < timedelta(minutes=w) for w in windows}
        for row in store().facts(
            resolution=interval,
            last=last,
            windows=[(w, last - back, last - middle) for w, (back, middle) in spans.items()],
            default_window_minutes=defaults.window_minutes,
        ):
            window = row[4]
            if current[window]:
                facts.append(_facts(row, last - spans[window][0], last))
    readers = heartbeat_readers(heartbeats if heartbeats is not None else supervision_heartbeats(now=now))
    found = []
    reading: dict[str, str] = {}
    for f in facts:
        applied = overrides[f.queue].over(defaults) if f.queue in overrides else defaults
        heard = readers.read(queue=f.queue, namespace=f.namespace, task=f.task)
        said = kinds_of(f, applied, heartbeat=heard)
        if said:
            reading[f.queue] = said[0] if said[0] in ("no-reader", "stalled") else ""
            found.append(QueueAttention(f.queue, said, applied, f))
        else:
            reading[f.queue] = ""
    found.sort(key=lambda a: (KINDS.index(a.kinds[0]), a.queue))
    return AttentionList(tuple(found[:limit]), len(found), len(facts), reading, defaults)
