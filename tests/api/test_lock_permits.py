"""Lock permits (``queen-locks``) through the KV routes, and grant-limited KV lists (issue 36).

A token granted a KV namespace lists exactly that namespace's keys on the
console list route.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from queenadmin.domain import kv, locks, tokens
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


def test_a_token_granted_a_namespace_lists_exactly_its_keys():
    """A read token granted ``kv:orders=read`` lists orders' keys on the console
    list route as getPrefix returns them, gets 403 for another namespace, and on
    ``queen-locks`` lists no permit (it has no lock grant); one granted
    ``lock:job*=read`` lists job's permits only."""
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
    assert [(r["key"], r["value"]["owner"]) for r in permits_listed] == [("job#0", "w-1")]
