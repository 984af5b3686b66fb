"""The official ``queen-mq`` client with ``binary_push``, ``push_compression``
and ``framed_pop`` against a live server, end to end: every body the client
sends is recorded, so each test proves the binary body went out (the client
falls back to JSON on its own when an item cannot travel in it)."""

from __future__ import annotations

import contextlib
import struct
import time
import uuid
from typing import Any

import pytest
import zstandard

from tests.conftest import run_server

pytestmark = pytest.mark.live


@contextlib.asynccontextmanager
async def _client(server: Any, **options: Any) -> Any:
    from queen import Queen

    client = Queen(url=server.url, bearer_token=server.token, retry_attempts=1, **options)
    try:
        yield client
    finally:
        await client.close()


def _record_wire(client: Any, bodies: list[bytes] | None = None) -> list[tuple[str, bytes | None]]:
    """(path, the first four bytes of a binary body or None) of every
    request; the binary bodies themselves go to ``bodies``."""
    http = client._http_client
    real = http._execute_request
    sent: list[tuple[str, bytes | None]] = []

    async def execute(url: str, method: str, body: Any, timeout: Any) -> Any:
        path = url.split("://", 1)[1].partition("/")[2]
        sent.append(("/" + path, body[:4] if isinstance(body, bytes) else None))
        if isinstance(body, bytes) and bodies is not None:
            bodies.append(body)
        return await real(url, method, body, timeout)

    http._execute_request = execute
    return sent


def _framed_ids(body: bytes) -> list[str]:
    """The message ids in a push body's one group of frames (flag 8)."""
    assert body[4] == 8
    at = 9
    for _ in range(2):
        at += 2 + struct.unpack_from("<H", body, at)[0]
    count, z_len = struct.unpack_from("<II", body, at)
    frames = zstandard.ZstdDecompressor().decompress(body[at + 8 : at + 8 + z_len])
    ids, at = [], 0
    for _ in range(count):
        ids.append(str(uuid.UUID(bytes=frames[at + 5 : at + 21])))
        at += 4 + struct.unpack_from("<I", frames, at)[0]
    return ids


async def _pop_all(client: Any, queue: str, want: int, seconds: float = 10.0) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        got += await client.queue(queue).batch(100).wait(True).timeout_millis(1000).pop()
    return got


@pytest.mark.parametrize("compression", [False, True], ids=["binary", "binary+zstd"])
async def test_binary_push_round_trips(live_server, unique, compression):
    """A binary push (plain, and framed and zstd-compressed) stores what the
    JSON push would: payloads, partitions, transaction ids; a repeated
    transaction id is a duplicate; with compression the client's message ids
    are kept."""
    q = unique("bin")
    async with _client(live_server, binary_push=True, push_compression=compression) as client:
        bodies: list[bytes] = []
        sent = _record_wire(client, bodies)
        await client.queue(q).create()
        payloads = [{"n": 1, "text": "héllo ✓"}, [1, 2, 3], "plain", None, 12.5, {"deep": {"er": [True]}}]
        pushed = await client.queue(q).push([{"data": p} for p in payloads])
        assert [r["status"] for r in pushed] == ["queued"] * len(payloads)
        other = await client.queue(q).partition("p2").push([{"data": "x", "transactionId": "txn-a"}])
        again = await client.queue(q).partition("p2").push([{"data": "y", "transactionId": "txn-a"}])
        assert other[0]["status"] == "queued"
        assert again[0]["status"] == "duplicate"
        binary = [head for path, head in sent if path == "/api/v1/push"]
        assert binary == [b"QPB1"] * 3

        messages = await _pop_all(client, q, len(payloads) + 1)
        by_partition: dict[str, list[Any]] = {}
        for m in messages:
            by_partition.setdefault(m["partition"], []).append(m)
        assert [m["data"] for m in by_partition["Default"]] == payloads
        assert [(m["data"], m["transactionId"]) for m in by_partition["p2"]] == [("x", "txn-a")]
        ids = {r["message_id"] for r in pushed}
        assert {m["id"] for m in by_partition["Default"]} == ids
        if compression:
            # The ids the client minted in the frames, kept.
            assert [r["message_id"] for r in pushed] == _framed_ids(bodies[0])
        assert (await client.ack(messages, True))["success"] is True


async def test_binary_transaction_commits_pushes_and_acks(live_server, unique):
    """With binary_push and push_compression a transaction goes out as QTB1:
    its ack (in the head) and its pushes (framed) commit together, and the
    results come back in the caller's order."""
    source, sink = unique("bin-src"), unique("bin-sink")
    async with _client(live_server, binary_push=True, push_compression=True) as client:
        sent = _record_wire(client)
        await client.queue(source).push([{"data": "in"}])
        (message,) = await _pop_all(client, source, 1)
        result = await (
            client.transaction()
            .queue(sink)
            .push([{"data": {"out": 1}}, {"data": {"out": 2}}])
            .ack(message)
            .queue(sink)
            .partition("other")
            .push([{"data": {"out": 3}, "transactionId": "own-txn"}])
            .commit()
        )
        assert result["success"] is True
        assert [r["type"] for r in result["results"]] == ["push", "push", "ack", "push"]
        assert [r["index"] for r in result["results"]] == [0, 1, 2, 3]
        assert result["results"][3]["transactionId"] == "own-txn"
        assert [head for path, head in sent if path == "/api/v1/transaction"] == [b"QTB1"]

        out = await _pop_all(client, sink, 3)
        assert sorted(m["data"]["out"] for m in out) == [1, 2, 3]
        assert {m["id"] for m in out} == {r["messageId"] for r in result["results"] if r["type"] == "push"}
        depth = await client.admin.get_queue_depth(source)
        assert (depth["pending"], depth["processing"]) == (0, 0)


def _record_answers(client: Any) -> list[bytes]:
    """The first four bytes of every answer the client reads."""
    httpx_client = client._http_client._client
    real = httpx_client.request
    heads: list[bytes] = []

    async def request(*args: Any, **kwargs: Any) -> Any:
        response = await real(*args, **kwargs)
        heads.append(response.content[:4])
        return response

    httpx_client.request = request
    return heads


@pytest.fixture(scope="module")
def framed_server() -> Any:
    """A live server that answers ``frames=true`` (``QUEENADMIN_FRAMED_POP``)."""
    with run_server(extra_env={"QUEENADMIN_FRAMED_POP": "1"}) as server:
        yield server


@pytest.mark.parametrize("framing", [True, False], ids=["framed", "json-by-default"])
async def test_framed_pop_reads_what_the_json_pop_reads(live_server, framed_server, unique, framing):
    """A pop with framed_pop=True gets the framed answer (QPF1) where the
    server is told to frame, JSON otherwise (the default), and unpacks the
    same messages a JSON pop of another group gets: ids, transaction and
    trace ids, payloads, partitions, offsets, attempts; createdAt to the
    millisecond (the frames carry no more)."""
    server = framed_server if framing else live_server
    q = unique("frames")
    trace = str(uuid.uuid4())
    async with _client(server, framed_pop=True) as framed, _client(server) as plain:
        await plain.queue(q).push([{"data": {"n": i, "s": "ü" * i}} for i in range(5)])
        await plain.queue(q).partition("p2").push([{"data": [None, 1.5], "traceId": trace}])
        heads = _record_answers(framed)
        got = sorted(await _pop_all_group(framed, q, "g-framed", 6), key=lambda m: (m["partition"], m["offset"]))
        want = sorted(await _pop_all_group(plain, q, "g-json", 6), key=lambda m: (m["partition"], m["offset"]))
        answered = [head for head in heads if head]
        assert answered
        assert set(answered) == {b"QPF1"} if framing else b"QPF1" not in answered
        assert len(got) == len(want) == 6
        for g, w in zip(got, want, strict=True):
            assert g["createdAt"] == (w["createdAt"][:23] + "Z" if framing else w["createdAt"])
            differ = {"createdAt", "leaseId", "consumerGroup"}
            assert {k: v for k, v in g.items() if k not in differ} == {k: v for k, v in w.items() if k not in differ}
        assert got[-1]["traceId"] == trace
        assert (await framed.ack(got, True, {"group": "g-framed"}))["success"] is True


async def _pop_all_group(client: Any, queue: str, group: str, want: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while len(got) < want and time.monotonic() < deadline:
        got += await client.queue(queue).group(group).batch(100).partitions(4).wait(True).timeout_millis(1000).pop()
    return got
