"""How a stored name travels in a dashboard URL, and how it is read back.

Any stored name has a link to its own page that names nothing else, even
names from before the name rule (``/``, ``..``, ``%2F``, ``?``, newlines).
A name in a path is one segment, spelled by ``segment``:

- ``~``, ``/`` and every character ``str.isprintable`` rejects become
  ``~XX``, one per UTF-8 byte; ``.`` and ``..`` are ``~2E`` / ``~2E~2E``,
  the empty name ``~``;
- the rest is percent-quoted, so ``?``, ``#``, ``%`` and spaces stay inside.

Plain names (``orders.new``) read as themselves, so bookmarks keep working.
Names in a query string are quoted by ``urlencode``. Every URL is
``reverse`` / ``{% url %}`` of a name in ``urls.py``, whose
``<storedname:...>`` segments go through ``NameConverter`` (``to_url``
spells, ``to_python`` reads back), so no module spells a path by hand.
Why not ``%2F`` and ``%2E``: docs/design.md.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from django.urls import reverse

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


#: A queue's sub-page -> its URL name (``queue_url(q, "purge")``).
_QUEUE_PAGES = {"": "dashboard:queue", "leases": "dashboard:queue_leases", "purge": "dashboard:queue_purge"}
#: A namespace's action -> its URL name (``kv_url(ns, "edit")``).
_KV_PAGES = {"": "dashboard:kv_keys", "edit": "dashboard:kv_edit", "delete": "dashboard:kv_delete"}


def queue_url(name: str, page: str = "") -> str:
    """``/queues/<name>/`` or one of its sub-pages: ``queue_url(q, "purge")``."""
    return reverse(_QUEUE_PAGES[page], kwargs={"name": name})


def message_url(queue: str, message_id: str) -> str:
    return reverse("dashboard:queue_message", kwargs={"name": queue, "message_id": message_id})


def kv_url(namespace: str, action: str = "") -> str:
    """``/kv/<ns>/`` or one of its actions: ``kv_url(ns, "edit")``."""
    return reverse(_KV_PAGES[action], kwargs={"namespace": namespace})


def kv_key_url(namespace: str, key: str) -> str:
    return reverse("dashboard:kv_key", kwargs={"namespace": namespace, "key": key})


class TailNameConverter(NameConverter):
    """A name that may also span segments (a KV key as old bookmarks spell it)."""

    regex = ".+"
