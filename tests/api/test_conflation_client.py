"""Conflation and queue priority on a live server: the official ``queen-mq``
client (``pop()``, ``consume()``, ``framed_pop``) and plain HTTP for the
exact answers (issue 27, parts E and F)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest

from queenadmin.api.wire.queues import AUTO_ACK_CONFLATION, NO_GROUP_CONFLATION
from tests.conftest import run_server

pytestmark = pytest.mark.live


@pytest.fixture
def http(live_server):
    with httpx.Client(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Bearer {live_server.token}"},
        timeout=30,
    ) as client:
        yield client


@contextlib.asynccontextmanager
async def _client(server: Any, **options: Any) -> Any:
    from queen import Queen

    client = Queen(url=server.url, bearer_token=server.token, retry_attempts=1, **options)
    try:
        yield client
    finally:
        await client.close()


async def _push(queen: Any, queue: str, partition: str, values: list[Any]) -> None:
    builder = queen.queue(queue)
    if partition != "Default":
        builder = builder.partition(partition)
    await builder.push([{"data": v} for v in values])


def _newest(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return sorted((m["partition"], m["data"]) for m in messages)


# -- conflation through the client ------------------------------------------------


async def test_one_conflating_pop_gets_the_newest_per_partition_and_acks_retire_the_rest(queen, unique):
    """Many pushes, one client pop: the newest of each partition; after the
    ack, new pushes deliver the new newest; a plain group still reads all."""
    q = unique("conf")
    for partition in ("a", "b", "c"):
        await _push(queen, q, partition, [f"{partition}{i}" for i in range(5)])
    popped = await queen.queue(q).group("last").conflation().batch(10).wait(False).pop()
    assert _newest(popped) == [("a", "a4"), ("b", "b4"), ("c", "c4")]
    assert (await queen.ack(popped, True, {"group": "last"}))["success"] is True
    assert await queen.queue(q).group("last").conflation().batch(10).wait(False).pop() == []
    await _push(queen, q, "a", ["a5", "a6"])
    again = await queen.queue(q).group("last").conflation().batch(10).wait(False).pop()
    assert _newest(again) == [("a", "a6")]
    await queen.ack(again, True, {"group": "last"})
    everything = await queen.queue(q).group("all").batch(100).partitions(3).wait(False).pop()
    assert len(everything) == 17
    depth = await queen.admin.get_queue_depth(q, "last")
    assert (depth["conflation"], depth["pending"], depth["effectivePending"]) == (True, 0, 0)
    assert (await queen.admin.get_queue_depth(q, "all"))["conflation"] is False


async def test_the_partition_and_namespace_routes_conflate_too(queen, unique):
    """``/pop/queue/q/partition/p`` and the namespace ``/pop`` deliver newest-only."""
    ns = unique("confns")
    q = f"{ns}.jobs"
    await queen.queue(q).namespace(ns).create()
    await _push(queen, q, "p1", [1, 2, 3])
    await _push(queen, q, "p2", [4, 5])
    one = await queen.queue(q).partition("p1").group("g").conflation().wait(False).pop()
    assert _newest(one) == [("p1", 3)]
    await queen.ack(one, True, {"group": "g"})
    found = await queen.queue().namespace(ns).group("g").conflation().batch(10).wait(False).pop()
    assert _newest(found) == [("p2", 5)]


def test_an_empty_conflating_pop_is_a_200_with_the_policy(http, unique):
    """Empty conflating pops, short and long-poll, answer 200 with ``conflation: true``, never 204."""
    q = unique("confempty")
    http.post("/configure", json={"queue": q})
    for params in ({"wait": "false"}, {"wait": "true", "timeout": "200"}):
        answer = http.get(f"/pop/queue/{q}", params={"consumerGroup": "g", "conflation": "true", **params})
        assert answer.status_code == 200
        assert answer.json() == {
            "success": True,
            "queue": q,
            "consumerGroup": "g",
            "partitionsClaimed": 0,
            "messages": [],
            "conflation": True,
        }
    # A plain group's empty pop is still a 204.
    plain = http.get(f"/pop/queue/{q}", params={"consumerGroup": "other", "wait": "false"})
    assert plain.status_code == 204


async def test_the_client_no_longer_raises_conflation_unsupported(queen, unique):
    """An empty conflating pop through the client is [] (the echo rides it), not ConflationUnsupportedError."""
    q = unique("confcheck")
    await queen.queue(q).create()
    assert await queen.queue(q).group("g").conflation().wait(False).pop() == []
    assert await queen.queue(q).group("g").conflation().wait(True).timeout_millis(300).pop() == []


async def test_a_disagreeing_pop_gets_the_stored_policy_and_the_conflict_flag(queen, http, unique, capsys):
    """The stored policy wins both ways; the answer says conflationConflict and the client warns, once."""
    from queen.utils.conflation import reset_conflict_warnings

    reset_conflict_warnings()
    q = unique("confconflict")
    await _push(queen, q, "Default", [1, 2, 3])
    first = await queen.queue(q).group("plain").batch(1).wait(False).pop()
    assert [m["data"] for m in first] == [1]
    await queen.ack(first, True, {"group": "plain"})
    asked = await queen.queue(q).group("plain").conflation().batch(1).wait(False).pop()
    # Stored plain: the next message in order, not the newest.
    assert [m["data"] for m in asked] == [2]
    assert "conflation conflict" in capsys.readouterr().err
    await queen.ack(asked, True, {"group": "plain"})

    raw = http.get(f"/pop/queue/{q}", params={"consumerGroup": "plain", "conflation": "true", "wait": "false"})
    body = raw.json()
    assert (raw.status_code, body["conflationConflict"], "conflation" in body) == (200, True, False)
    assert [m["data"] for m in body["messages"]] == [3]
    empty = http.get(f"/pop/queue/{q}", params={"consumerGroup": "plain", "conflation": "true", "wait": "false"})
    assert (empty.status_code, empty.json()["conflationConflict"], empty.json()["messages"]) == (200, True, [])

    await _push(queen, q, "Default", [4, 5])
    http.get(f"/pop/queue/{q}", params={"consumerGroup": "last", "conflation": "true", "wait": "false"})
    stored = http.get(f"/pop/queue/{q}", params={"consumerGroup": "last", "wait": "false", "leaseSeconds": "1"})
    assert stored.status_code == 200
    assert (stored.json()["conflation"], stored.json()["conflationConflict"]) == (True, True)


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/pop/queue/{q}", {"conflation": "true"}, NO_GROUP_CONFLATION),
        ("/pop/queue/{q}/partition/p", {"conflation": "true", "batch": "0"}, NO_GROUP_CONFLATION),
        ("/pop", {"conflation": "true"}, NO_GROUP_CONFLATION),
        ("/pop/queue/{q}", {"conflation": "true", "consumerGroup": "g", "autoAck": "true"}, AUTO_ACK_CONFLATION),
        ("/pop", {"conflation": "1", "consumerGroup": "g", "commitOnDelivery": "1"}, AUTO_ACK_CONFLATION),
    ],
)
def test_conflation_refusals_answer_queens_shape(http, unique, path, params, message):
    """No group, or auto-ack: 400 ``{success: false, error, messages: []}``, before any other check."""
    answer = http.get(path.format(q=unique("confbad")), params={"wait": "false", **params})
    assert (answer.status_code, answer.json()) == (400, {"success": False, "error": message, "messages": []})


def test_a_bad_conflation_flag_is_a_plain_400(http, unique):
    """``conflation=maybe`` is the usual bad-parameter answer."""
    answer = http.get(f"/pop/queue/{unique('confflag')}", params={"conflation": "maybe", "consumerGroup": "g"})
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "conflation must be true or false", "code": "bad_request"},
    )


async def test_the_client_raises_on_a_refused_conflating_pop(queen, unique):
    """The client raises (not []) when its conflating pop is refused."""
    q = unique("confraise")
    with pytest.raises(httpx.HTTPStatusError):
        await queen.queue(q).conflation().wait(False).pop()
    with pytest.raises(httpx.HTTPStatusError):
        await queen.queue(q).group("g").conflation().commit_on_delivery().wait(False).pop()


@pytest.mark.parametrize("batch", [10, None], ids=["batch", "autopilot"])
async def test_consume_with_conflation_handles_the_newest_per_partition(queen, unique, batch):
    """``consume()`` with conflation runs the handler once per partition, on
    the newest message (a pinned batch, or the client's autopilot sizing)."""
    q = unique("confconsume")
    await _push(queen, q, "a", list(range(10)))
    await _push(queen, q, "b", list(range(100, 110)))
    handled: list[tuple[str, Any]] = []

    async def handler(message: dict[str, Any]) -> None:
        handled.append((message["partition"], message["data"]))

    builder = queen.queue(q).group("c").conflation()
    if batch is not None:
        builder = builder.batch(batch)
    consumer = builder.each().limit(2).timeout_millis(1000).consume(handler)
    await asyncio.wait_for(consumer, 30)
    assert sorted(handled) == [("a", 9), ("b", 109)]
    depth = await queen.admin.get_queue_depth(q, "c")
    assert (depth["pending"], depth["processing"]) == (0, 0)


@pytest.fixture(scope="module")
def framed_server() -> Any:
    """A live server that answers ``frames=true`` (``QUEENADMIN_FRAMED_POP``)."""
    with run_server(extra_env={"QUEENADMIN_FRAMED_POP": "1"}) as server:
        yield server


async def test_a_framed_conflating_pop_carries_the_keys_in_its_header(framed_server, unique):
    """With framed_pop the answer is QPF1 and the client finds ``conflation`` in its v1 header."""
    q = unique("confframes")
    async with _client(framed_server, framed_pop=True) as queen:
        await _push(queen, q, "Default", ["x", "y", "z"])
        raw = queen._http_client._client
        real = raw.request
        heads: list[bytes] = []

        async def request(*args: Any, **kwargs: Any) -> Any:
            response = await real(*args, **kwargs)
            heads.append(response.content[:4])
            return response

        raw.request = request
        popped = await queen.queue(q).group("g").conflation().wait(False).pop()
        assert [m["data"] for m in popped] == ["z"]
        assert heads[-1] == b"QPF1"


# -- priority ---------------------------------------------------------------------


async def test_the_client_configures_priority_and_gets_it_back(queen, http, unique):
    """``config({"priority": 7})`` is stored and echoed (the client's test_configure_queue)."""
    q = unique("prio")
    # The client's own test_queue.py::test_configure_queue, verbatim options.
    config = {
        "lease_time": 60,
        "retry_limit": 5,
        "priority": 7,
        "max_size": 5000,
        "encryption_enabled": True,
        "dlq_after_max_retries": True,
    }
    created = await queen.queue(q).config(config).create()
    assert created["configured"] is True
    options = created["options"]
    assert (options["leaseTime"], options["retryLimit"], options["priority"], options["maxSize"]) == (60, 5, 7, 5000)
    assert http.get(f"/resources/queues/{q}").json()["options"]["priority"] == 7


@pytest.mark.parametrize("by", ["namespace", "task"])
async def test_namespace_and_task_pops_drain_the_higher_priority_queue_first(queen, unique, by):
    """A pop by namespace or task takes the high-priority queue's messages
    first, then falls through to the low one once the high one is empty."""
    selector = unique("sel")
    low, high = unique("low"), unique("high")
    # The low queue is made first, so id order alone would serve it first.
    for name, priority in ((low, 1), (high, 9)):
        await getattr(queen.queue(name), by)(selector).config({"priority": priority}).create()
        await queen.queue(name).push([{"data": f"{name}-{i}"} for i in range(2)])
    pops = []
    for _ in range(3):
        got = await getattr(queen.queue(), by)(selector).batch(10).wait(False).pop()
        pops.append([m["data"] for m in got])
        if got:
            await queen.ack(got, True)
    assert pops == [[f"{high}-0", f"{high}-1"], [f"{low}-0", f"{low}-1"], []]


async def test_waiters_that_skipped_their_claim_still_say_the_policy(live_server, unique):
    """Conflating pops that join a waiting pop of their lane (no claim of
    their own) answer 200 with ``conflation: true`` at their timeout; plain
    pops of a plain group that do the same answer 204."""
    q = unique("confwait")
    async with httpx.AsyncClient(
        base_url=f"{live_server.url}/api/v1", headers={"Authorization": f"Bearer {live_server.token}"}, timeout=30
    ) as client:
        await client.post("/configure", json={"queue": q})
        answers = {}
        for group, extra in (("last", {"conflation": "true"}), ("plain", {})):
            pops = []
            for _ in range(3):
                params = {"wait": "true", "timeout": 1500, "consumerGroup": group, **extra}
                pops.append(asyncio.ensure_future(client.get(f"/pop/queue/{q}", params=params)))
                await asyncio.sleep(0.2)
            answers[group] = await asyncio.gather(*pops)
    assert [(a.status_code, a.json()["conflation"]) for a in answers["last"]] == [(200, True)] * 3
    assert [a.status_code for a in answers["plain"]] == [204] * 3


def test_a_plain_groups_pop_has_neither_conflation_key(http, unique):
    """Both keys appear only when true: a plain group's answer has none of them."""
    q = unique("confplain")
    http.post("/push", json={"items": [{"queue": q, "payload": 1}]})
    answer = http.get(f"/pop/queue/{q}", params={"consumerGroup": "g", "wait": "false"})
    assert answer.status_code == 200
    assert {"conflation", "conflationConflict"} & set(answer.json()) == set()
    assert [m["data"] for m in answer.json()["messages"]] == [1]
