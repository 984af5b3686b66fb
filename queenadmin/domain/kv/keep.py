"""What a key's history keeps of a write (issue 41), with no database.

A write of a key is kept in ``KVVersion`` by the write's own statement or
transaction (``store/``); this module says whether a namespace is kept and
what of a value: the JSON text itself up to ``KV_HISTORY_VALUE_BYTES``
bytes, else only its sha256 (a 64 KiB value written a thousand times a
second would otherwise double the database's write volume).
"""

from __future__ import annotations

import functools
import hashlib
import json

from queenadmin.conf import settings
from queenadmin.domain.kv.ops import LOCKS_NAMESPACE

#: What history keeps of a value: its JSON text (or None), its sha256 in
#: hex (or None), its size in UTF-8 bytes.
Kept = tuple[str | None, str | None, int]
#: A delete keeps no value.
DELETED: Kept = (None, None, 0)
#: How many characters of who wrote are kept.
ACTOR_CHARS = 150


@functools.lru_cache(maxsize=8)
def _excluded(setting: str) -> frozenset[str]:
    return frozenset(part.strip() for part in setting.split(",") if part.strip())


def recorded(namespace: str) -> bool:
    """Whether the writes of ``namespace`` are kept: not those of a
    namespace of ``KV_HISTORY_EXCLUDE``. Lock permits are kept as a lock's
    life (``domain/locks/history.py``), without their owner (``kept``)."""
    return namespace not in _excluded(settings.KV_HISTORY_EXCLUDE)


def _permit_kept(value_json: str, waited_ms: int | None) -> Kept:
    try:
        value = json.loads(value_json)
    except ValueError:
        value = None
    caller = value.get("caller") if isinstance(value, dict) else None
    shown: dict[str, object] = {"caller": caller} if isinstance(caller, str) else {}
    if waited_ms:
        shown["waitedMs"] = waited_ms
    text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
    return text, None, len(text.encode())


def kept(value_json: str, namespace: str = "", waited_ms: int | None = None) -> Kept:
    """What history keeps of a value given as its JSON text. Of a lock
    permit, only who took it (``caller``) and how long its owner waited
    (``waited_ms``): never its owner, a credential."""
    if namespace == LOCKS_NAMESPACE:
        return _permit_kept(value_json, waited_ms)
    data = value_json.encode()
    if len(data) > settings.KV_HISTORY_VALUE_BYTES:
        return None, hashlib.sha256(data).hexdigest(), len(data)
    return value_json, None, len(data)
