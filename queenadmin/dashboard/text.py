"""A stored name as plain text an operator can read (a title, a confirmation).

Pages show names through the template library's ``shown`` and ``shown_text``
filters; views and the admin, which write names into messages, use
``shown_text`` from here.
"""

from __future__ import annotations

#: How the common invisible characters are written (the rest: ``\xNN``,
#: ``\uNNNN``, ``\UNNNNNNNN``, as Python writes them).
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x00": "\\0"}


def escape_char(char: str) -> str:
    """``char`` written as Python writes it in a string: ``\\n``, ``\\x7f``, ``\\u202e``."""
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown_text(value: object) -> str:
    """A stored name as plain text (a title, an attribute): every character
    ``str.isprintable`` rejects written as its escape (``\\n``, ``\\u202e``)."""
    text = "" if value is None else str(value)
    return "".join(c if c.isprintable() else escape_char(c) for c in text)
