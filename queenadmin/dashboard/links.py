"""How a stored name travels in a dashboard URL, and how it is read back.

Any name the store holds has a link to its own page, and that link names
nothing else: databases from before the name rule hold names with ``/``,
``..``, ``%2F``, ``?``, ``#``, newlines and NUL. A name in a path is one
segment, spelled by ``segment``:

- ``~`` and ``/`` and every character ``str.isprintable`` rejects
  (controls, bidi and other format marks, separators other than the
  space) become ``~XX``, one per UTF-8 byte; a name that is exactly ``.``
  or ``..`` is spelled ``~2E`` / ``~2E~2E``, and the empty name ``~``;
- the rest is percent-quoted (``quote``), so ``?``, ``#``, ``%``, ``\\``
  and spaces stay inside the segment.

Why not ``%2F`` for ``/``: Django decodes the path before routing, so it
would split the segment. Why not ``%2E`` for dots: browsers treat ``.``,
``..``, ``%2e`` and ``%2e%2e`` segments as dot-segments and drop them (or
the segment before). The spelled form holds no ``/``, no dot-segment and
no raw control character (so no NUL: ``middleware.RefuseUnstorable``
refuses those in requests), and plain names (``orders.new``) read as
themselves, which keeps bookmarks of them working.

Names in a query string (``?partition=``, ``?name=``) are quoted by
``urlencode``: browsers do not normalise a query and Django decodes each
value once. URLs are built here by string formatting, never by
``reverse`` (which refuses what its pattern does not match); ``urls.py``
reads segments back with ``NameConverter``.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from queenadmin.plumbing import db

#: ``~XX``: one escaped UTF-8 byte.
_ESCAPED = re.compile(rb"~([0-9A-Fa-f]{2})")


def _spelled(char: str) -> str:
    if char in "~/" or not char.isprintable():
        return "".join(f"~{byte:02X}" for byte in char.encode())
    return char


def spell(text: str) -> str:
    """``text`` with ``~``, ``/`` and invisible characters as ``~XX``, the
    rest as it is (``name_of`` reads it back)."""
    return "".join(_spelled(c) for c in text)


def segment(name: str) -> str:
    """``name`` as one path segment of a URL (quoted; see the module docstring)."""
    if name in ("", ".", ".."):
        return "~" if not name else "~2E" * len(name)
    return quote(spell(name), safe="~")


def name_of(text: str) -> str:
    """The name a decoded path segment spells; ``ValueError`` if none.

    A ``~`` not followed by two hex digits spells nothing, nor do escaped
    bytes that are not UTF-8. A name holding NUL is refused where the
    database cannot store one (PostgreSQL): no such name can exist there.
    """
    if text == "~":
        return ""
    raw = text.encode()
    if raw.count(b"~") != len(_ESCAPED.findall(raw)):
        raise ValueError(f"not a spelled name: {text!r}")
    name = _ESCAPED.sub(lambda found: bytes([int(found.group(1), 16)]), raw).decode()
    if "\x00" in name and db.is_postgres():
        raise ValueError("no stored name holds NUL here")
    return name


class NameConverter:
    """A stored name as one path segment (``<storedname:...>`` in ``urls.py``)."""

    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        return name_of(value)

    def to_url(self, value: str) -> str:
        # ``reverse`` quotes what this returns: give the unquoted spelling.
        return segment(value) if value in ("", ".", "..") else spell(value)


def queue_url(name: str, *tail: str) -> str:
    """``/queues/<name>/`` and its sub-pages: ``queue_url(q, "purge")``."""
    return "/queues/" + segment(name) + "/" + "".join(f"{part}/" for part in tail)


def message_url(queue: str, message_id: str) -> str:
    return queue_url(queue, "messages", segment(message_id))


def kv_url(namespace: str, *tail: str) -> str:
    """``/kv/<ns>/`` and its actions: ``kv_url(ns, "edit")``."""
    return "/kv/" + segment(namespace) + "/" + "".join(f"{part}/" for part in tail)


def kv_key_url(namespace: str, key: str) -> str:
    return kv_url(namespace) + "key/" + segment(key)


class TailNameConverter(NameConverter):
    """A name that may also span segments (a KV key as old bookmarks spell it)."""

    regex = ".+"
