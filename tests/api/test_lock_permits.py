"""Lock permits (``queen-locks``) through the KV routes, and grant-limited KV lists (issue 36).

Only the lock operations write a permit: every KV write to ``queen-locks``
(batch, path route, transaction) answers 400 ``kv_locks_namespace`` and
changes nothing. A caller who may read a lock but not write it (a read-scope
token, or a grant of ``read`` on the lock) sees its owner and token only as
fingerprints, on every route that shows a permit. A token granted a KV
namespace lists exactly that namespace's keys on the console list route.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from queenadmin.domain import kv, locks, tokens
from queenadmin.domain.masking import mask_token
from queenadmin.errors import KVBadRequest
from queenadmin.models import KVEntry

pytestmark = pytest.mark.django_db

LOCKS = kv.LOCKS_NAMESPACE


def client_of(scope: str = "write", grants: tuple[str, ...] = ()) -> Client:
    token = tokens.token_create(
        by=tokens.HOST, name=f"permits-{scope}-{len(grants)}-{'-'.join(grants)}"[:100], scope=scope, grants=grants
    )
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Client, path: str, body: Any) -> Any:
    return client.post(f"/api/v1{path}", data=json.dumps(body), content_type="application/json")


def permits() -> list[tuple[Any, ...]]:
    return list(
        KVEntry.objects.filter(namespace=LOCKS)
        .order_by("key")
        .values_list("key", "version", "value_json", "expires_at")
    )


def test_no_kv_write_takes_or_ends_a_lock_that_acquire_refused_as_held():
    """A permit held by w-1: acquire by w-2 is refused, and so is every KV write
    to its row (put, putIfAbsent, delete, incr, the path routes, a transaction's
    KV op): 400 ``kv_locks_namespace`` in the KV envelope, the row unchanged,
    w-2 still refused and w-1's token still releases it."""
    writer = client_of("admin")
    held = locks.lock_acquire(name="job", ttl=60, owner="w-1")
    assert held.acquired
    steal = [{"op": "acquire", "name": "job", "ttlSeconds": 60, "owner": "w-2"}]
    assert post(writer, "/locks", steal).json()["results"][0]["acquired"] is False
    before = permits()
    permit = {"ns": LOCKS, "key": "job#0"}
    writes = [
        ("POST", "/kv", [{"op": "put", **permit, "value": {"owner": "w-2"}, "ttlSeconds": 60}]),
        ("POST", "/kv", [{"op": "put", **permit, "value": {"owner": "w-2"}, "forever": True, "expect": held.token}]),
        (
            "POST",
            "/kv",
            [{"op": "putIfAbsent", "ns": LOCKS, "key": "fresh#0", "value": {"owner": "w-2"}, "forever": True}],
        ),
        ("POST", "/kv", [{"op": "delete", **permit}]),
        ("POST", "/kv", [{"op": "incr", **permit, "delta": 1, "forever": True}]),
        (
            "POST",
            "/kv",
            [{"op": "put", "ns": "other", "key": "k", "value": 1, "forever": True}, {"op": "delete", **permit}],
        ),
        ("PUT", "/kv/queen-locks/job%230", {"value": {"owner": "w-2"}, "ttlSeconds": 60}),
        ("DELETE", "/kv/queen-locks/job%230", {}),
        ("POST", "/transaction", {"operations": [], "kv": [{"op": "delete", **permit}]}),
        ("POST", "/transaction", {"operations": [], "kv": [{"op": "put", **permit, "value": {}, "forever": True}]}),
    ]
    for method, path, body in writes:
        answer = writer.generic(method, f"/api/v1{path}", json.dumps(body), content_type="application/json")
        assert answer.status_code == 400, (path, body, answer.content)
        payload = answer.json()
        assert (payload["error"], payload["reason"]) == ("kv_bad_request", "kv_locks_namespace"), payload
        assert "lock operations" in payload["detail"]
    assert permits() == before
    assert not KVEntry.objects.filter(namespace="other").exists()
    assert post(writer, "/locks", steal).json()["results"][0]["acquired"] is False
    assert locks.lock_release(name="job", token=held.token).released


def test_the_in_process_kv_api_refuses_permit_writes_too():
    """The rule is the KV domain's: Django code's ``kv_put``, ``kv_delete`` and
    ``kv_incr`` on ``queen-locks`` raise ``kv_locks_namespace`` and write nothing."""
    held = locks.lock_acquire(name="job", ttl=60, owner="w-1")
    before = permits()
    writes = [
        lambda: kv.kv_put(namespace=LOCKS, key="job#0", value={"owner": "w-2"}, ttl=60),
        lambda: kv.kv_put(namespace=LOCKS, key="new#0", value={"owner": "w-2"}, ttl=60, expect=0),
        lambda: kv.kv_delete(namespace=LOCKS, key="job#0", expect=held.token),
        lambda: kv.kv_incr(namespace=LOCKS, key="job#1", delta=1, ttl=None),
    ]
    for write in writes:
        with pytest.raises(KVBadRequest) as refused:
            write()
        assert refused.value.reason == "kv_locks_namespace"
    assert permits() == before


def test_a_guard_check_on_a_permit_still_commits_a_holders_transaction():
    """The lock's own guard (a ``check`` of its permit) stays open to a holder: its transaction commits."""
    writer = client_of("write")
    held = locks.lock_acquire(name="job", ttl=60, owner="w-1")
    guard = {"op": "check", "ns": LOCKS, "key": "job#0", "expect": held.token, "required": True}
    body = {"operations": [], "kv": [guard, {"op": "put", "ns": "state", "key": "k", "value": 1, "forever": True}]}
    answer = post(writer, "/transaction", body)
    assert answer.status_code == 200, answer.content
    assert answer.json()["success"] is True
    assert kv.kv_get(namespace="state", key="k").value == 1


def _shown(client: Client) -> list[dict[str, Any]]:
    """What each read route shows of the permit ``job#0``: the lock get's (owner, token),
    the KV reads' (value, version), then the path read's ETag."""
    got = post(client, "/locks", [{"op": "get", "name": "job"}]).json()["results"][0]["holders"]
    answer = post(
        client,
        "/kv",
        [
            {"op": "get", "ns": LOCKS, "key": "job#0"},
            {"op": "getMany", "ns": LOCKS, "keys": ["job#0"]},
            {"op": "getPrefix", "ns": LOCKS, "prefix": "job#"},
        ],
    )
    assert answer.status_code == 200, answer.content
    batch = answer.json()["results"]
    path = client.get("/api/v1/kv/queen-locks/job%230")
    listed = post(client, "/resources/kv/list", {"namespace": LOCKS, "prefix": "job#"}).json()["rows"]
    rows = [batch[0], batch[1]["rows"][0], batch[2]["rows"][0], path.json(), listed[0]]
    shown = [(h["owner"], h["token"]) for h in got] + [(r["value"], r["version"]) for r in rows]
    return [*shown, path.get("ETag")]


def test_read_scope_sees_a_locks_fingerprint_never_its_owner_or_token():
    """A read-scope token, and a write token granted only ``read`` on the lock,
    see the holder's owner and token as fingerprints on the lock ``get``, the KV
    get, getMany, getPrefix and path reads and the console list (no ETag of the
    version either), and cannot ``check`` the permit (403: a holding check would
    confirm a guessed token). A token that may write the lock sees them raw."""
    held = locks.lock_acquire(name="job", ttl=60, owner="w-secret")
    owner_fp, token_fp = mask_token("w-secret"), mask_token(held.token)
    raw = [("w-secret", held.token)] + [({"owner": "w-secret"}, held.token)] * 5 + [f'"{held.token}"']
    masked = [(owner_fp, token_fp)] + [({"owner": owner_fp}, token_fp)] * 5 + [None]
    readers = [client_of("read"), client_of("write", ("lock:job*=read", "kv:state=write"))]
    for reader in readers:
        assert _shown(reader) == masked
        check = post(reader, "/kv", [{"op": "check", "ns": LOCKS, "key": "job#0", "expect": held.token}])
        assert check.status_code == 403, check.content
        assert "w-secret" not in check.text
        assert "version" not in check.text
    assert _shown(client_of("write", ("lock:job*=write",))) == raw
    assert _shown(client_of("write")) == raw
    # What the reader saw releases nothing.
    assert not locks.lock_release(name="job", token=held.token + 1).released
    assert locks.lock_holders(name="job").holders[0].token == held.token


def test_a_transactions_read_of_a_permit_is_masked_for_a_lock_read_grant():
    """A write token granted ``read`` on a lock reads its permit in a transaction as fingerprints."""
    held = locks.lock_acquire(name="job", ttl=60, owner="w-secret")
    writer = client_of("write", ("lock:job*=read", "kv:state=write"))
    body = {
        "operations": [],
        "kv": [
            {"op": "get", "ns": LOCKS, "key": "job#0"},
            {"op": "put", "ns": "state", "key": "k", "value": 1, "forever": True},
        ],
    }
    answer = post(writer, "/transaction", body)
    assert answer.status_code == 200, answer.content
    row = answer.json()["results"][0]
    assert (row["value"], row["version"]) == ({"owner": mask_token("w-secret")}, mask_token(held.token))


def test_a_token_granted_a_namespace_lists_exactly_its_keys():
    """A read token granted ``kv:orders=read`` lists orders' keys on the console
    list route as getPrefix returns them, gets 403 for another namespace, and on
    ``queen-locks`` lists no permit (it has no lock grant); one granted
    ``lock:job*=read`` lists job's permits only, as fingerprints."""
    for key in ("a", "b/c", "d"):
        kv.kv_put(namespace="orders", key=key, value={"k": key}, ttl=None)
    kv.kv_put(namespace="billing", key="x", value=1, ttl=None)
    locks.lock_acquire(name="job", ttl=60, owner="w-1")
    locks.lock_acquire(name="other", ttl=60, owner="w-2")
    reader = client_of("read", ("kv:orders=read",))
    listed = post(reader, "/resources/kv/list", {"namespace": "orders"})
    assert listed.status_code == 200, listed.content
    rows = listed.json()["rows"]
    assert [r["key"] for r in rows] == ["a", "b/c", "d"]
    assert [r["value"] for r in rows] == [{"k": "a"}, {"k": "b/c"}, {"k": "d"}]
    prefix = post(reader, "/kv", [{"op": "getPrefix", "ns": "orders", "prefix": "b"}]).json()["results"][0]["rows"]
    page = post(reader, "/resources/kv/list", {"namespace": "orders", "prefix": "b"}).json()["rows"]
    assert [r["key"] for r in page] == [r["key"] for r in prefix] == ["b/c"]
    refused = post(reader, "/resources/kv/list", {"namespace": "billing"})
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    assert "rows" not in refused.json()
    assert post(reader, "/resources/kv/list", {"namespace": LOCKS}).json()["rows"] == []
    lock_reader = client_of("read", ("lock:job*=read",))
    permits_listed = post(lock_reader, "/resources/kv/list", {"namespace": LOCKS}).json()["rows"]
    assert [(r["key"], r["value"]["owner"]) for r in permits_listed] == [("job#0", mask_token("w-1"))]
