"""Binary and zstd request bodies that are not whole or not allowed, against
a live ``serve``: what each gets (400, 413 or 415, in the protocol's shapes),
the same on SQLite and PostgreSQL, never a 500. And a zstd bomb: refused at
the body limit while it inflates, the server's memory flat."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard
from queen.http.push_binary import PushBatch, encode_push_binary, encode_push_frames, encode_transaction_frames

from tests.conftest import run_server

pytestmark = pytest.mark.live

MIB = 1024 * 1024
BINARY = "application/x-queen-push"
U32 = struct.Struct("<I")


def batch(*payloads: bytes, txn: bool = True) -> list[PushBatch]:
    return [PushBatch("bin-bad", "Default", list(payloads), [""] * len(payloads) if txn else None)]


PLAIN = encode_push_binary(batch(b'{"a":1}', b"2"))
FRAMES = encode_push_frames(batch(b'{"a":1}', b"2"))
#: Where the one group's ``u32 n | u32 z_len | z`` start in FRAMES.
GROUP = 4 + 1 + 4 + 2 + len("bin-bad") + 2 + len("Default")


def with_frames(raw: bytes, n: int = 2) -> bytes:
    """FRAMES with the group's frames replaced by ``raw``, compressed."""
    z = zstandard.ZstdCompressor(write_content_size=True).compress(raw)
    return FRAMES[:GROUP] + U32.pack(n) + U32.pack(len(z)) + z


def frames_of(body: bytes) -> bytes:
    z_len = U32.unpack_from(body, GROUP + 4)[0]
    return zstandard.ZstdDecompressor().decompress(body[GROUP + 8 : GROUP + 8 + z_len])


def zero_bomb(size: int, *, content_size: bool) -> bytes:
    """One zstd frame of ``size`` zero bytes, compressed a MiB at a time."""
    compressor = zstandard.ZstdCompressor(level=1, write_content_size=content_size)
    chunker = compressor.chunker(size=size if content_size else -1)
    out = b""
    zeros = bytes(MIB)
    for _ in range(size // MIB):
        out += b"".join(chunker.compress(zeros))
    return out + b"".join(chunker.finish())


def engine(detail: str) -> dict[str, str]:
    return {"error": detail, "code": "bad_request"}


def binary(detail: str) -> dict[str, str]:
    return engine(f"binary body: {detail}")


def starts(prefix: str) -> Any:
    """An engine 400 whose prose starts with ``prefix`` (zstd's own words follow)."""
    return ("prefix", prefix)


#: A frames body whose one frame is flagged encrypted.
_ENCRYPTED = bytearray(frames_of(FRAMES))
_ENCRYPTED[4] = 4
_GROUP_TWO = frames_of(FRAMES)
_Z = U32.unpack_from(FRAMES, GROUP + 4)[0]
TOO_LARGE = "payload too large\n"
#: A whole zstd frame, one empty raw block, that declares 1 TiB of content.
DECLARES_1_TIB = b"\x28\xb5\x2f\xfd\xe0" + (2**40).to_bytes(8, "little") + b"\x01\x00\x00"
UNSUPPORTED = {"error": "Content-Encoding 'gzip' is not supported (identity or zstd)", "code": "unsupported_media_type"}

# (id, path, headers, body, status, answer): answer is the JSON body, a
# ("prefix", text) for an engine 400, or the text of a plain-text answer.
CASES: list[tuple[str, str, dict[str, str], bytes, int, Any]] = [
    ("empty", "/api/v1/push", {}, b"", 400, binary('a push body starts with "QPB1"')),
    ("json-as-binary", "/api/v1/push", {}, b'{"items":[]}', 400, binary('a push body starts with "QPB1"')),
    (
        "transaction-magic-on-push",
        "/api/v1/push",
        {},
        encode_transaction_frames(b"", batch(b"1")),
        400,
        binary('a push body starts with "QPB1"'),
    ),
    ("magic-only", "/api/v1/push", {}, b"QPB1", 400, binary("the body is truncated")),
    ("unknown-flag", "/api/v1/push", {}, b"QPB1\x20" + PLAIN[5:], 400, binary("unknown flags 32")),
    (
        "counts-flag",
        "/api/v1/push",
        {},
        b"QPB1\x06" + PLAIN[5:],
        400,
        binary("the counts-only answer (flag 2) is not supported; leave it unset"),
    ),
    ("truncated-plain", "/api/v1/push", {}, PLAIN[:-1], 400, binary("the body is truncated")),
    ("trailing-bytes", "/api/v1/push", {}, PLAIN + b"\x00", 400, binary("bytes after the last group")),
    ("too-many-groups", "/api/v1/push", {}, PLAIN[:5] + U32.pack(2) + PLAIN[9:], 400, binary("the body is truncated")),
    (
        "payload-not-json",
        "/api/v1/push",
        {},
        encode_push_binary(batch(b"{nope")),
        400,
        binary("items[0].payload: the request body is not valid JSON"),
    ),
    (
        "payload-empty",
        "/api/v1/push",
        {},
        encode_push_binary(batch(b"1", b"")),
        400,
        binary("items[1].payload is empty (one JSON document each)"),
    ),
    ("queue-not-utf8", "/api/v1/push", {}, PLAIN[:11] + b"\xff" + PLAIN[12:], 400, binary("queue is not UTF-8")),
    (
        "body-zstd-damaged",
        "/api/v1/push",
        {},
        b"QPB1\x05" + U32.pack(10) + b"not zstd at all",
        400,
        starts("binary body: the body is not valid zstd: "),
    ),
    (
        "body-zstd-wrong-length",
        "/api/v1/push",
        {},
        b"QPB1\x05" + U32.pack(3) + zstandard.ZstdCompressor().compress(PLAIN[5:]),
        400,
        binary(f"the body inflates to {len(PLAIN) - 5} bytes, not the 3 it declares"),
    ),
    ("body-zstd-declares-too-much", "/api/v1/push", {}, b"QPB1\x05" + U32.pack(2**32 - 1) + b"x", 413, TOO_LARGE),
    (
        "frames-not-zstd",
        "/api/v1/push",
        {},
        FRAMES[: GROUP + 4] + U32.pack(4) + b"nope",
        400,
        starts("binary body: group 0 is not valid zstd: "),
    ),
    (
        "frames-zstd-truncated",
        "/api/v1/push",
        {},
        FRAMES[: GROUP + 4] + U32.pack(_Z - 3) + FRAMES[GROUP + 8 : -3],
        400,
        starts("binary body: group 0 is not valid zstd: "),
    ),
    ("frames-group-truncated", "/api/v1/push", {}, FRAMES[:-1], 400, binary("the body is truncated")),
    (
        "frames-fewer-than-n",
        "/api/v1/push",
        {},
        with_frames(_GROUP_TWO, n=3),
        400,
        binary("group 0's frames is truncated"),
    ),
    (
        "frames-more-than-n",
        "/api/v1/push",
        {},
        with_frames(_GROUP_TWO, n=1),
        400,
        binary("group 0 holds more than its 1 frames"),
    ),
    ("frame-cut-short", "/api/v1/push", {}, with_frames(_GROUP_TWO[:-1]), 400, binary("group 0's frames is truncated")),
    (
        "frame-shorter-than-its-header",
        "/api/v1/push",
        {},
        with_frames(U32.pack(3) + b"\x00" * 3, n=1),
        400,
        binary("a frame is truncated"),
    ),
    (
        "frame-encrypted",
        "/api/v1/push",
        {},
        with_frames(bytes(_ENCRYPTED)),
        400,
        binary("an encrypted frame (the broker stores plaintext frames only)"),
    ),
    (
        "frame-unknown-flag",
        "/api/v1/push",
        {},
        with_frames(_GROUP_TWO[:4] + b"\x40" + _GROUP_TWO[5:]),
        400,
        binary("a frame has unknown flags 64"),
    ),
    (
        "frames-bomb",
        "/api/v1/push",
        {},
        FRAMES[: GROUP + 4] + (lambda z: U32.pack(len(z)) + z)(zero_bomb(80 * MIB, content_size=False)),
        413,
        TOO_LARGE,
    ),
    (
        "push-magic-on-transaction",
        "/api/v1/transaction",
        {},
        FRAMES,
        400,
        binary('a transaction body starts with "QTB1"'),
    ),
    (
        "transaction-counts-flag",
        "/api/v1/transaction",
        {},
        b"QTB1\x02" + encode_transaction_frames(b"", batch(b"1"))[5:],
        400,
        binary("unsupported flags 2 (the counts-only answer, flag 2, is not supported)"),
    ),
    (
        "transaction-head-not-json",
        "/api/v1/transaction",
        {},
        encode_transaction_frames(b"{oops", batch(b"1")),
        400,
        binary("the head: the request body is not valid JSON"),
    ),
    (
        "transaction-head-not-object",
        "/api/v1/transaction",
        {},
        encode_transaction_frames(b"[]", batch(b"1")),
        400,
        binary("the head: the body must be a JSON object"),
    ),
    (
        "transaction-head-too-long",
        "/api/v1/transaction",
        {},
        b"QTB1\x00" + U32.pack(1000) + b"{}",
        400,
        binary("the body is truncated"),
    ),
    (
        "encoding-unknown",
        "/api/v1/push",
        {"Content-Encoding": "gzip", "Content-Type": "application/json"},
        b'{"items":[]}',
        415,
        UNSUPPORTED,
    ),
    ("encoding-unknown-binary", "/api/v1/push", {"Content-Encoding": "gzip"}, PLAIN, 415, UNSUPPORTED),
    (
        "encoding-zstd-damaged",
        "/api/v1/push",
        {"Content-Encoding": "zstd", "Content-Type": "application/json"},
        b"garbage",
        400,
        starts("the request body is not valid zstd: "),
    ),
    (
        "encoding-zstd-truncated",
        "/api/v1/transaction",
        {"Content-Encoding": "zstd", "Content-Type": "application/json"},
        zstandard.ZstdCompressor().compress(b'{"operations":[]}' * 50)[:-2],
        400,
        starts("the request body is not valid zstd: "),
    ),
    (
        "encoding-zstd-on-kv",
        "/api/v1/kv",
        {"Content-Encoding": "zstd", "Content-Type": "application/json"},
        b"garbage",
        400,
        {
            "error": "kv_bad_request",
            "reason": "kv_bad_body",
            "detail": "the request body is not valid zstd: not a zstd frame",
        },
    ),
    (
        "encoding-zstd-declared-bomb",
        "/api/v1/push",
        {"Content-Encoding": "zstd", "Content-Type": "application/json"},
        DECLARES_1_TIB,
        413,
        TOO_LARGE,
    ),
]


@pytest.fixture(scope="module")
def api(live_server) -> httpx.Client:
    headers = {"Authorization": f"Bearer {live_server.token}", "Content-Type": BINARY}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=60) as client:
        assert client.post("/api/v1/configure", json={"queue": "bin-bad"}).status_code == 200
        yield client


@pytest.mark.parametrize(
    ("path", "headers", "body", "status", "answer"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_binary_or_zstd_body_gets_its_answer(api, path, headers, body, status, answer):
    """Each malformed, truncated, oversized or unsupported body gets the
    status and body the table says, and nothing is written."""
    response = api.post(path, content=body, headers=headers)
    assert response.status_code == status, response.text
    if isinstance(answer, str):
        assert response.headers["content-type"].startswith("text/plain")
        assert response.text == answer
    elif isinstance(answer, tuple):
        got = response.json()
        assert got["code"] == "bad_request"
        assert got["error"].startswith(answer[1]), got
        assert set(got) == {"error", "code"}
    else:
        assert response.json() == answer
    assert api.get("/api/v1/pop/queue/bin-bad?wait=false").status_code == 204


def test_zstd_json_bodies_are_read_on_push_and_transaction(api):
    """A JSON body sent with ``Content-Encoding: zstd`` is read as the JSON
    it inflates to, on push and on transaction; a binary push body too."""
    headers = {"Content-Encoding": "zstd", "Content-Type": "application/json"}
    compress = zstandard.ZstdCompressor().compress
    push = {"items": [{"queue": "bin-zstd", "payload": {"n": 1}}]}
    pushed = api.post("/api/v1/push", content=compress(json.dumps(push).encode()), headers=headers)
    assert pushed.status_code == 201, pushed.text
    assert [r["status"] for r in pushed.json()] == ["queued"]
    txn = {"operations": [{"type": "push", "items": [{"queue": "bin-zstd", "payload": {"n": 2}}]}]}
    committed = api.post("/api/v1/transaction", content=compress(json.dumps(txn).encode()), headers=headers)
    assert committed.status_code == 200, committed.text
    assert committed.json()["success"] is True
    binary_body = encode_push_binary([PushBatch("bin-zstd", "Default", [b'{"n":3}'], [""])])
    pushed = api.post("/api/v1/push", content=compress(binary_body), headers={"Content-Encoding": "zstd"})
    assert pushed.status_code == 201, pushed.text
    popped = api.get("/api/v1/pop/queue/bin-zstd?batch=10")
    assert [m["data"] for m in popped.json()["messages"]] == [{"n": 1}, {"n": 2}, {"n": 3}]


def _memory_mib(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    return {name: int(re.search(rf"{name}:\s+(\d+)", status).group(1)) / 1024 for name in ("VmRSS", "VmHWM")}


def test_a_zstd_bomb_is_refused_at_the_limit_with_memory_flat():
    """A 32 KiB body that inflates to 1 GiB (a frame that does not declare its
    size) answers 413 once 64 MiB came out; the server's peak memory grows
    by about the limit, not by the gigabyte. A frame that declares 1 GiB is
    refused before it inflates at all."""
    bomb = zero_bomb(1024 * MIB, content_size=False)
    declared = zero_bomb(1024 * MIB, content_size=True)
    assert len(bomb) < 64 * 1024
    with run_server() as server:
        headers = {
            "Authorization": f"Bearer {server.token}",
            "Content-Type": "application/json",
            "Content-Encoding": "zstd",
        }
        before = _memory_mib(server.process.pid)
        for body in (bomb, declared):
            response = httpx.post(f"{server.url}/api/v1/push", content=body, headers=headers, timeout=120)
            assert response.status_code == 413
            assert response.text == TOO_LARGE
        after = _memory_mib(server.process.pid)
    growth = after["VmHWM"] - before["VmRSS"]
    print(f"\npeak growth for a {len(bomb) // 1024} KiB body inflating to 1 GiB: {growth:.0f} MiB")
    assert growth < 160
