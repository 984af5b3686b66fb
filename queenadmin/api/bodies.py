"""Request bodies as the routes read them: ``Content-Encoding`` undone.

A body may come zstd-compressed (``Content-Encoding: zstd``, RFC 8878), and
the binary push body carries zstd frames of its own (``wire/binary.py``).
Either way the limits hold for what the body inflates to, checked while it
inflates: a 1 KiB body that would inflate to 1 GiB is refused once
``MAX_BODY_BYTES`` have come out, never inflated whole.
"""

from __future__ import annotations

import io
import struct

import zstandard
from django.http import HttpRequest

from queenadmin.conf import settings
from queenadmin.errors import QueenError, UnsupportedMediaType

#: Output read from the decompressor at a time: the most it holds beyond
#: what was already inflated.
_CHUNK = 1024 * 1024

_FRAME_MAGIC = 0xFD2FB528
_SKIPPABLE = 0x184D2A50
_U32 = struct.Struct("<I")

#: ``HttpRequest`` attribute caching the decoded body.
_DECODED = "_queenadmin_decoded_body"


class BodyTooLarge(Exception):
    """A body refused after it was read (its parse would cost too much):
    answered like the body limit, 413 in plain text (``ApiErrorMiddleware``)."""


class ZstdDamaged(ValueError):
    """The bytes are not whole zstd frames."""


def _frames_complete(data: bytes) -> None:
    """Walk the frames' headers and block headers (RFC 8878 section 3.1).

    The decompressor reads a truncated frame as a shorter output and says
    nothing, so the walk is what tells a cut-off body from a whole one.
    Raises ``ZstdDamaged``.
    """
    at = 0
    end = len(data)
    if end == 0:
        raise ZstdDamaged("no zstd frame")
    while at < end:
        if at + 4 > end:
            raise ZstdDamaged("truncated frame header")
        magic = _U32.unpack_from(data, at)[0]
        if magic & 0xFFFFFFF0 == _SKIPPABLE:
            if at + 8 > end:
                raise ZstdDamaged("truncated skippable frame")
            at += 8 + _U32.unpack_from(data, at + 4)[0]
            continue
        if magic != _FRAME_MAGIC:
            raise ZstdDamaged("not a zstd frame")
        at += 4
        if at >= end:
            raise ZstdDamaged("truncated frame header")
        descriptor = data[at]
        at += 1
        fcs_flag = descriptor >> 6
        single_segment = descriptor >> 5 & 1
        checksum = descriptor >> 2 & 1
        dict_id = (0, 1, 2, 4)[descriptor & 3]
        fcs = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        at += (0 if single_segment else 1) + dict_id + fcs
        while True:
            if at + 3 > end:
                raise ZstdDamaged("truncated block")
            header = data[at] | data[at + 1] << 8 | data[at + 2] << 16
            at += 3
            kind = header >> 1 & 3
            size = header >> 3
            if kind == 3:
                raise ZstdDamaged("reserved block type")
            at += 1 if kind == 1 else size
            if header & 1:
                break
        at += 4 * checksum
        if at > end:
            raise ZstdDamaged("truncated frame")


def inflate_zstd(data: bytes, *, limit: int) -> bytes:
    """The bytes the zstd frames in ``data`` inflate to, at most ``limit``.

    Raises ``BodyTooLarge`` once the output passes ``limit`` (or a frame
    declares more), having held at most ``limit`` plus one chunk, and
    ``ZstdDamaged`` for bytes that are not whole zstd frames.
    """
    _frames_complete(data)
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise ZstdDamaged(str(exc)) from exc
    if declared > limit:
        raise BodyTooLarge
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := reader.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
    except zstandard.ZstdError as exc:
        raise ZstdDamaged(str(exc)) from exc
    return b"".join(chunks)


def decoded_body(request: HttpRequest, error: type[QueenError], reason: str) -> bytes:
    """``request.body`` with its ``Content-Encoding`` undone.

    ``identity`` (or none) and ``zstd`` are known; any other coding is
    refused with 415 (``UnsupportedMediaType``), bad zstd with ``error``
    (400), and a body that inflates past ``MAX_BODY_BYTES`` with 413
    (``BodyTooLarge``), as a body sent that large is.
    """
    cached: bytes | None = getattr(request, _DECODED, None)
    if cached is not None:
        return cached
    # META, not ``request.headers``: that builds a mapping of every header.
    coding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    body = request.body
    if coding in ("", "identity"):
        decoded = body
    elif coding == "zstd":
        if not body:
            decoded = body
        else:
            try:
                decoded = inflate_zstd(body, limit=settings.MAX_BODY_BYTES)
            except ZstdDamaged as exc:
                raise error(f"the request body is not valid zstd: {exc}", reason=reason) from exc
    else:
        raise UnsupportedMediaType(f"Content-Encoding {coding!r} is not supported (identity or zstd)")
    setattr(request, _DECODED, decoded)
    return decoded
