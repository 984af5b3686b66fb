"""A KV namespace or a lock name with a trailing newline is refused (400);
a traceId with one is no trace.

``re.match`` with a pattern ending in ``$`` also accepts ``"abc\\n"``: ``$``
matches before a final newline. The published schemas (JSON Schema, where
``$`` is the end of the text) already say such a name is not one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from queenadmin.domain import kv, tokens
from queenadmin.models import KVEntry, Message

pytestmark = pytest.mark.django_db

BAD_NAMESPACE = {
    "error": "kv_bad_request",
    "reason": "kv_bad_namespace",
    "detail": "ns must match ^[a-z0-9][a-z0-9._-]{0,63}$",
}


@pytest.fixture
def client() -> Client:
    token = tokens.token_create(by=tokens.HOST, name="newline-tests")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Client, path: str, body: Any) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json")


def user_rows() -> int:
    return KVEntry.objects.exclude(namespace=kv.LOCKS_NAMESPACE).count()


@pytest.mark.parametrize(
    "op",
    [
        {"op": "put", "ns": "app\n", "key": "k", "value": 1, "forever": True},
        {"op": "get", "ns": "app\n", "key": "k"},
        {"op": "getPrefix", "ns": "app\n", "prefix": "k"},
    ],
)
def test_kv_call_with_a_namespace_ending_in_newline_is_refused(client, op):
    """The whole call answers 400 ``kv_bad_namespace`` and writes nothing."""
    response = post(client, "/api/v1/kv", {"operations": [op]})
    assert (response.status_code, response.json()) == (400, BAD_NAMESPACE)
    assert user_rows() == 0


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_kv_path_route_with_a_namespace_ending_in_newline_is_refused(client, method):
    """``/kv/{ns}/{key}`` with ``ns`` = ``app%0A`` answers 400 ``kv_bad_namespace``."""
    body = json.dumps({"value": 1, "forever": True}) if method == "put" else ""
    response = getattr(client, method)("/api/v1/kv/app%0A/k", data=body, content_type="application/json")
    assert (response.status_code, response.json()) == (400, BAD_NAMESPACE)
    assert user_rows() == 0


def test_kv_list_with_a_namespace_ending_in_newline_is_refused(client):
    """``/resources/kv/list`` answers 400 ``kv_bad_namespace``, not an empty page."""
    response = post(client, "/api/v1/resources/kv/list", {"namespace": "app\n"})
    assert (response.status_code, response.json()) == (400, BAD_NAMESPACE)


def test_kv_namespace_without_the_newline_is_accepted(client):
    """The same namespace without the newline is a namespace."""
    response = post(client, "/api/v1/kv", {"operations": [{"op": "get", "ns": "app", "key": "k"}]})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "op",
    [
        {"op": "acquire", "name": "jobs\n", "ttlSeconds": 30},
        {"op": "renew", "name": "jobs\n", "ttlSeconds": 30, "token": 1},
        {"op": "release", "name": "jobs\n", "token": 1},
        {"op": "get", "name": "jobs\n"},
    ],
)
def test_lock_name_ending_in_newline_is_refused(client, op):
    """Every lock op answers 400 ``locks_bad_name`` and takes no permit."""
    response = post(client, "/api/v1/locks", {"operations": [op]})
    assert response.status_code == 400
    assert response.json() == {
        "error": "locks_bad_request",
        "reason": "locks_bad_name",
        "detail": "name is a non-empty string of at most 256 bytes, without control characters or '#'",
    }
    assert not KVEntry.objects.filter(namespace=kv.LOCKS_NAMESPACE).exists()


def test_push_with_a_trace_id_ending_in_newline_is_stored_without_a_trace(client):
    """A traceId that is not UUID text is dropped, as any other non-UUID traceId."""
    trace = "0190b6a2-3c4d-7e8f-9a0b-1c2d3e4f5a6b\n"
    response = post(client, "/api/v1/push", {"items": [{"queue": "q1", "payload": {"a": 1}, "traceId": trace}]})
    assert response.status_code == 201
    assert list(Message.objects.values_list("trace_id", flat=True)) == [None]
