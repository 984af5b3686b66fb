"""The one rule for every name the store keeps.

Queues, partitions, consumer groups, KV keys, lock names, timer keys,
stream query names and trace names: each concept keeps its own bounds (the
protocol's byte budget, a lock name's ``#``, a namespace's pattern) and its
own refusal (error class and wire code), and asks this module whether the
text is a name at all.

A name is text the databases can store and compare (no NUL, which
PostgreSQL refuses in text, and no lone surrogate, which is not UTF-8)
that shows as itself wherever it is printed: no control characters (C0,
DEL, C1: a newline splits a log line or a header, an escape rewrites a
terminal) and no bidirectional formatting characters (the marks LRM, RLM
and ALM, the embeddings and overrides U+202A..U+202E and the isolates
U+2066..U+2069), which reorder how a name and the text after it are shown,
so that an operator can read one name and act on another (the "Trojan
Source" attack, CVE-2021-42574). None of them has a use in a machine name;
``/``, ``.``, ``..``, spaces and every other character stay allowed.

Names stored before this rule may break it. Reads and deletes look them up
with ``unstorable`` only, so such a name can still be found and removed.
"""

from __future__ import annotations

import re
from typing import Final

from queenadmin.errors import InvalidArgument, NameTooLong

#: C0 controls, DEL and C1 controls (regular-expression escapes).
_CONTROL: Final = r"\x00-\x1f\x7f-\x9f"
#: ALM, LRM and RLM; the embeddings and overrides; the isolates.
_BIDI: Final = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
#: Lone surrogates: a Python string can hold one (from a JSON ``\ud800``
#: escape), UTF-8 cannot.
_SURROGATE: Final = r"\ud800-\udfff"

#: The rule as a JSON Schema ``pattern`` (ECMA-262 escapes, which pydantic's
#: regex engine reads too), for the published schemas of name fields.
SCHEMA_PATTERN: Final = f"^[^{_CONTROL}{_BIDI}]+$"
#: The same, for a field where ``""`` means none (a consumer group: queue mode).
SCHEMA_PATTERN_OR_EMPTY: Final = f"^[^{_CONTROL}{_BIDI}]*$"

_REFUSED = re.compile(f"[{_CONTROL}{_BIDI}{_SURROGATE}]")
_UNSTORABLE = re.compile(f"[\\x00{_SURROGATE}]")
_BIDI_CHARS = re.compile(f"[{_BIDI}]")


def fault(name: str) -> str | None:
    """What ``name`` holds that no stored name may, as the end of a
    sentence (``f"queue {fault}"``), or ``None`` when it holds none.

    NUL is named as such, so refusals read as they did before this rule.
    Length and emptiness are the caller's: each concept has its own budget.
    """
    found = _REFUSED.search(name)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return "must not contain NUL"
    if "\ud800" <= char <= "\udfff":
        return "must be valid Unicode (a lone surrogate is not)"
    if _BIDI_CHARS.match(char):
        return "must not contain bidirectional formatting characters"
    return "must not contain control characters"


def is_name(name: str) -> bool:
    """Whether ``name`` keeps the rule (length aside)."""
    return _REFUSED.search(name) is None


def unstorable(text: str) -> str | None:
    """What in ``text`` no database can store or compare (NUL, a lone
    surrogate), as ``fault`` words it, or ``None``.

    The check for looking a name up: a name stored before the rule (a
    newline, a bidi mark) is still found, and so can be read and deleted.
    """
    if _UNSTORABLE.search(text) is None:
        return None
    return fault(text)


def label_of(text: str, max_chars: int) -> str:
    """``text`` as a stored label of who acted (a token's name, a JWT's
    ``sub``): cut to ``max_chars`` characters, and each character the rule
    refuses (a control, a bidi mark, NUL, a lone surrogate) replaced by
    U+FFFD, so that any identity stores on both databases and shows as
    itself. A label is never looked up, so nothing is refused.
    """
    return _REFUSED.sub("\ufffd", text[:max_chars])


#: The most characters of a caller's identity a store records.
IDENTITY_CHARS: Final = 256


def identity_label(identity: str) -> str:
    """A caller's identity (a JWT's ``sub``, our token's name) as the stores
    record it: the ``producerSub`` a push stamps, the holder a lock's permit
    names. ``label_of`` cut to ``IDENTITY_CHARS``: the one rule for both, so
    one caller is one label, and a ``sub`` holding NUL (which PostgreSQL
    refuses in text) stores on both databases."""
    return label_of(identity, IDENTITY_CHARS)


#: The engine's store-key budget for a queue, partition, group or trace
#: name (protocol 12).
ENGINE_NAME_BYTES: Final = 511


def check_engine_name(name: str, what: str, max_bytes: int = ENGINE_NAME_BYTES) -> str:
    """Return ``name`` if a queue, partition, consumer group or trace may be
    stored under it, else raise the engine family's refusal: ``InvalidArgument``
    (400 ``bad_request``), or ``NameTooLong`` (413) over ``max_bytes``."""
    if not name:
        raise InvalidArgument(f"{what} must be a non-empty string")
    found = fault(name)
    if found is not None:
        raise InvalidArgument(f"{what} {found}")
    if len(name.encode()) > max_bytes:
        raise NameTooLong(f"{what} is over {max_bytes} bytes")
    return name
