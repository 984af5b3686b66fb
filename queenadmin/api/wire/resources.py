"""The message log's resource reads on the wire: queue lists and details,
depth, pause and resume, deletes, the overview and the dead letters.

The same rules as ``wire/queues.py`` (its checks and refusals), for the
routes that read or administer queues rather than move messages.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from queenadmin.api.wire.fields import NO_NUL, TEXT, Field, Op, Param, Query
from queenadmin.api.wire.queues import (
    GROUP,
    MAX_OFFSET,
    Params,
    check_group,
    check_text,
    engine_bad,
    json_object,
    time_param,
)
from queenadmin.domain import queues

LANES = Query(
    {
        "stats": Param(
            Field("string", pattern=NO_NUL, doc="lanes: names and partition counts only; anything else: every figure")
        )
    }
)


def wants_lanes(params: Params) -> bool:
    """``GET /resources/queues?stats=lanes``: names and partition counts only."""
    return params.get("stats") == "lanes"


DEPTH = Query(
    {"group": Param(replace(GROUP, default=None, doc="a consumer group (none or empty: the slowest named one)"))}
)


def parse_depth_group(params: Params) -> str | None:
    """``GET .../depth?group=``: a named group, or None (the slowest)."""
    group = params.get("group") or None
    return check_group(group) if group else None


PAUSE = Op(
    "PauseIn",
    {
        "reason": Field(
            "string",
            default="",
            pattern=NO_NUL,
            check=partial(check_text, what="reason"),
            doc="why, for the audit trail (at most 2,000 characters kept)",
        )
    },
    doc="Optional: the reason kept in the audit trail (none: no body or ``null``).",
    extra={"type": ["object", "null"]},
    tenant_free=False,
)


def parse_pause(body: Any) -> str:
    """A pause's or resume's reason for the audit trail: ``{"reason": ...}``,
    optional (no body, ``null`` or no reason: none)."""
    fields = {} if body is None else json_object(body)
    return str(PAUSE.fields["reason"].read(fields, "reason", engine_bad))


# --------------------------------------------------------------------------
# Dead letters

DEFAULT_DLQ_LIMIT = 100
MAX_DLQ_LIMIT = 1000


_PAGE = "limit must be positive and offset not negative"
#: Read in this order (the page first).
DLQ = Query(
    {
        "limit": Param(
            Field("integer", ge=1, refusal=_PAGE, doc=f"default {DEFAULT_DLQ_LIMIT}"),
            "an integer",
            cap=MAX_DLQ_LIMIT,
        ),
        "offset": Param(
            Field("integer", ge=0, le=MAX_OFFSET, refusal=_PAGE, too_high=f"offset must be at most {MAX_OFFSET}"),
            "an integer",
        ),
        "queue": TEXT,
        "consumerGroup": TEXT,
        "partition": TEXT,
        "from": time_param("from", "failed at or after"),
        "to": time_param("to", "failed at or before"),
    }
)


def parse_dlq(params: Params) -> queues.DeadLetterQuery:
    """``GET /dlq``: filters, ``from``/``to`` ISO times, and one page."""
    got = DLQ.read(params, engine_bad)
    return queues.DeadLetterQuery(
        queue=got["queue"],
        group=got["consumerGroup"],
        partition=got["partition"],
        since=got["from"],
        until=got["to"],
        limit=got["limit"] or DEFAULT_DLQ_LIMIT,
        offset=got["offset"] or 0,
    )
