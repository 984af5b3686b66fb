"""Template helpers of the dashboard: times, countdowns, masking and the nav.

Times render as ``<time>`` elements with the exact UTC instant in
``datetime``; ``static/queenadmin/dashboard.js`` turns them into "in 4 min"
(``data-rel``) or a ticking countdown (``data-countdown``) and shows the UTC
and browser-local time on hover. Without JavaScript the UTC text stays.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape, escape, format_html
from django.utils.safestring import SafeString, mark_safe

from queenadmin.dashboard import links, pages
from queenadmin.dashboard.text import escape_char, shown_text
from queenadmin.domain import clock
from queenadmin.domain.masking import mask_token

register = template.Library()


@register.filter
def iso(moment: datetime | None) -> str:
    """``2026-11-30T19:04:42.123Z`` (milliseconds, UTC)."""
    return "" if moment is None else clock.iso_millis_z(moment)


@register.filter
def utc(moment: datetime | None) -> str:
    """``2026-11-30 19:04:42 UTC``."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def mask(value: object) -> str:
    """A lock owner or fencing token as its fingerprint (``domain.masking``)."""
    return mask_token(value) or "—"


@register.filter
def seconds(delta: timedelta | None) -> str:
    """A duration as ``4m 05s`` / ``2h 10m`` / ``3d 4h``."""
    if delta is None:
        return ""
    total = int(delta.total_seconds())
    sign, total = ("-", -total) if total < 0 else ("", total)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m {secs:02d}s"
    return f"{sign}{secs}s"


@register.simple_tag
def when(moment: datetime | None, empty: str = "—") -> SafeString:
    """A time shown relative to now ("in 4 min"), exact on hover."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    return format_html('<time datetime="{}" data-rel>{}</time>', iso(moment), utc(moment))


@register.simple_tag
def countdown(moment: datetime | None, empty: str = "never", since: datetime | None = None) -> SafeString:
    """A countdown to ``moment`` ticking in the browser ("12s", "expired").

    With ``since`` (the lease's last grant or renew), "expiring" means the
    last quarter of the lease (at least 3 s), so a short lease renewed on
    time does not look like trouble; without, the last 10 s.
    """
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    span = "" if since is None else str(int((moment - since).total_seconds() * 1000))
    return format_html('<time datetime="{}" data-countdown data-span-ms="{}">{}</time>', iso(moment), span, utc(moment))


@register.filter
def preview(value: Any, length: int = 80) -> str:
    """A JSON value on one line, cut to ``length`` characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= length else text[: length - 1] + "…"


@register.simple_tag
def stamp(moment: datetime | None, empty: str = "—") -> SafeString:
    """Relative time, with the exact UTC time and the browser's local time beside."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    at = iso(moment)
    return format_html(
        '<span class="stamp"><time datetime="{}" data-rel>{}</time>'
        '<small>{} · <time datetime="{}" data-local>local</time></small></span>',
        at,
        utc(moment),
        moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        at,
    )


@register.simple_tag(takes_context=True)
def nav_links(context: template.Context) -> list[Any]:
    """The nav the signed-in user may see (``pages.NAV``), the current page
    (the context's ``page``) marked: ``{% nav_links as nav %}``."""
    return pages.nav_links(context.get("user"), str(context.get("page") or ""))


@register.filter
def timer_query(row: Any) -> str:
    """The query string naming a timer as shown (for its action links)."""
    return urlencode(
        {
            "queue": row.queue,
            "key": row.timer_key,
            "message_id": row.message_id,
            "txn": row.txn,
            "partition": row.partition,
        }
    )


@register.filter
def split_commas(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


@register.filter
def payload_preview(payload: bytes | None, length: int = 2000) -> str:
    """A timer's payload as text (JSON as sent), cut to ``length`` characters."""
    if payload is None:
        return ""
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        return f"({len(payload)} bytes, not text)"
    return text if len(text) <= length else text[: length - 1] + "…"


@register.simple_tag
def audit_target(entry: Any) -> SafeString:
    """An audit entry's target linked to its page (``audit_target_link``)."""
    return audit_target_link(entry.target, entry.kind, entry.action)


def audit_target_link(target: str, kind: str, action: str = "") -> SafeString:
    """An audit target linked to its page (lock, timer, KV key, queue).

    ``action``: a queue's group actions write ``<queue>/<group>``, every
    other queue action the queue's name alone (which may hold ``/``).
    """
    if kind == "kv" and "/" in target:
        namespace, _, key = target.partition("/")
        return format_html('<a href="{}">{}</a>', links.kv_key_url(namespace, key), shown(target))
    if kind == "lock":
        name = target.rpartition("#")[0] or target
        url = reverse("dashboard:locks") + "?" + urlencode({"name": name}, quote_via=quote)
        return format_html('<a href="{}">{}</a>', url, shown(target))
    if kind == "timer" and "/" in target:
        queue, _, key = target.partition("/")
        url = reverse("dashboard:timers") + "?" + urlencode({"queue": queue, "prefix": key}, quote_via=quote)
        return format_html('<a href="{}">{}</a>', url, shown(target))
    if kind in ("queue", "dlq"):
        queue = target.rpartition("/")[0] if action.startswith("queue.group_") else target
        return format_html('<a href="{}">{}</a>', links.queue_url(queue or target), shown(target))
    return shown(target)


@register.simple_tag
def exact(moment: datetime | None, empty: str = "—") -> SafeString:
    """An exact time for a sentence: UTC, then the browser's local time."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    return format_html(
        '<span class="exact"><time datetime="{}">{}</time> (<time datetime="{}" data-local>local</time>)</span>',
        iso(moment),
        utc(moment),
        iso(moment),
    )


#: An ISO 8601 instant with its offset, as the audit trail writes them
#: (``clock.iso_micros_z``, ``clock.iso_jsonb``).
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})")


@register.filter
def with_times(text: object) -> SafeString:
    """``text`` escaped, each ISO instant in it shown as ``2026-11-30 19:04:42
    UTC`` in a ``<time>`` (the browser's local time on hover)."""
    raw = "" if text is None else str(text)
    parts: list[str] = []
    last = 0
    for found in _INSTANT.finditer(raw):
        try:
            moment = datetime.fromisoformat(found.group().replace("Z", "+00:00"))
        except ValueError:
            continue
        parts.append(conditional_escape(raw[last : found.start()]))
        parts.append(format_html('<time datetime="{}">{}</time>', iso(moment), utc(moment)))
        last = found.end()
    parts.append(conditional_escape(raw[last:]))
    # Every part is escaped above.
    return mark_safe("".join(parts))


register.filter("shown_text", shown_text)


@register.filter
def wire_value(value: object) -> str:
    """A queue option's value as the API writes it (JSON: ``true``, ``300``)."""
    return json.dumps(value)


@register.filter
def shown(value: object) -> SafeString:
    """A stored name as an operator reads it, distinct from every other name.

    Invisible characters (controls, bidi and other format marks, spaces
    other than the plain one) show as their escape in a ``span.ctl`` whose
    title names the code point, so ``a\\nb`` and ``ab`` differ on the page
    and a right-to-left override cannot turn the text around it. A name
    with right-to-left letters sits in a ``<bdi>``, so they reorder nothing
    outside it (other names are left bare, as most are).
    """
    text = "" if value is None else str(value)
    if text.isascii() and text.isprintable():
        # Most names: no invisible character, no right-to-left letter.
        return escape(text)
    parts = [
        conditional_escape(c)
        if c.isprintable()
        else format_html('<span class="ctl" title="U+{}">{}</span>', f"{ord(c):04X}", escape_char(c))
        for c in text
    ]
    # Every part is escaped above.
    shown = mark_safe("".join(parts))
    if any(unicodedata.bidirectional(c) in _RIGHT_TO_LEFT for c in text):
        return format_html("<bdi>{}</bdi>", shown)
    return shown


#: Bidirectional classes that reorder the text around them.
_RIGHT_TO_LEFT = frozenset({"R", "AL", "AN", "RLE", "RLO", "RLI", "LRE", "LRO", "LRI", "FSI", "PDF", "PDI"})
