"""Bad input never gets a 500: arbitrary JSON and non-JSON at every body route.

Whatever arrives, the answer is below 500 and, when it is a refusal, a JSON
error body (protocol.md 1.3 families) -- except the plain-text 413 of an
oversize body, which no test here sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.live

ROUTES = [
    ("POST", "/api/v1/kv"),
    ("PUT", "/api/v1/kv/fuzz/some/key"),
    ("DELETE", "/api/v1/kv/fuzz/some/key"),
    ("POST", "/api/v1/resources/kv/list"),
    ("POST", "/api/v1/locks"),
    ("POST", "/api/v1/configure"),
    ("POST", "/api/v1/push"),
    ("POST", "/api/v1/ack"),
    ("POST", "/api/v1/ack/batch"),
    ("POST", "/api/v1/lease/not-a-lease/extend"),
    ("POST", "/api/v1/fetch"),
    ("POST", "/api/v1/partitions/changed"),
    ("POST", "/api/v1/traces"),
    ("POST", "/api/v1/consumer-groups/fuzz/subscription"),
    ("POST", "/api/v1/consumer-groups/fuzz/queues/fuzz/seek"),
    ("POST", "/api/v1/messages/1/fuzz/dlq"),
    ("POST", "/api/v1/dlq/1/replay"),
    ("POST", "/api/v1/timers"),
    ("POST", "/api/v1/transaction"),
]

FIELDS = [
    "op", "ns", "key", "keys", "prefix", "value", "ttlSeconds", "forever", "expect", "required", "delta",
    "min", "max", "limit", "after", "operations", "name", "owner", "token", "slot", "queue", "partition",
    "payload", "items", "transactionId", "partitionId", "leaseId", "status", "consumerGroup", "options",
    "acknowledgments", "namespace", "seconds", "mode", "entries", "offset", "maxBytes", "since", "data",
    "traceNames", "eventType", "subscriptionTimestamp", "toEnd", "timestamp", "error",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    # NUL, which PostgreSQL cannot store in text and SQLite can.
    st.text(alphabet=st.sampled_from(["a", "\x00", "é", "/", "#"]), min_size=1, max_size=8),
    st.sampled_from(["get", "put", "acquire", "release", "completed", "failed", "dlq", "x" * 600]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(FIELDS), inner, max_size=6),
    ),
    max_leaves=20,
)
#: Number literals json.dumps cannot write: past a double (infinity once
#: parsed), huge integers, tiny fractions.
NUMBER_TEXT = ["1e400", "-1e400", "1e309", "2e308", "1" + "0" * 400, "-" + "9" * 120, "1e-400", "0.1e-330"]
overflowing = st.builds(
    lambda field, number, op: (
        f'{{"{field}":{number},"operations":[{{"op":"{op}","ns":"fuzz","key":"k","forever":true,"{field}":{number}}}],'
        f'"items":[{{"queue":"fuzz","{field}":{number}}}]}}'
    ),
    st.sampled_from(FIELDS),
    st.sampled_from(NUMBER_TEXT),
    st.sampled_from(["incr", "put", "getPrefix", "acquire", "schedule"]),
)
#: Arrays and objects nested around and past the limit, bare and as a value.
nested = st.builds(
    lambda depth, opener, wrap: wrap.replace("V", opener * depth + "1" + {"[": "]", '{"a":': "}"}[opener] * depth),
    st.integers(min_value=100, max_value=3000),
    st.sampled_from(["[", '{"a":']),
    st.sampled_from(
        [
            "V",
            '{"operations":[{"op":"put","ns":"fuzz","key":"k","forever":true,"value":V}]}',
            '{"items":[{"queue":"fuzz","payload":V}]}',
            '{"value":V,"forever":true}',
            '{"operations":[{"op":"schedule","queue":"fuzz","key":"t","delayMs":1,"payload":V}]}',
        ]
    ),
)
bodies = st.one_of(
    overflowing,
    nested,
    values.map(json.dumps),
    st.dictionaries(st.sampled_from(FIELDS), values, max_size=8).map(json.dumps),
    st.lists(st.dictionaries(st.sampled_from(FIELDS), values, max_size=8), max_size=4).map(
        lambda ops: json.dumps({"operations": ops})
    ),
    st.sampled_from(["", "{", "NaN", "[1,", '{"a": Infinity}', "\x00", '"\\ud800"']),
)


@pytest.fixture(scope="module")
def http(live_server) -> Iterator[httpx.Client]:
    """One kept-alive client for the module: a new client and connection per
    example cost more than the server's answer."""
    headers = {"Authorization": f"Bearer {live_server.token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
        yield client


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_arbitrary_bodies_never_get_a_server_error(http, method, path):
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=bodies)
    def check(body: str) -> None:
        response = http.request(method, path, content=body.encode())
        assert response.status_code < 500, (body, response.status_code, response.text[:300])
        if response.status_code >= 400:
            payload = response.json()
            assert isinstance(payload, dict)
            assert "error" in payload

    check()


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/pop/queue/fuzz?batch=abc",
        "/api/v1/pop/queue/fuzz?batch=-5&wait=maybe",
        "/api/v1/pop/queue/fuzz?timeout=99999999999999999999&wait=false",
        "/api/v1/pop/queue/fuzz/partition/p?leaseSeconds=-1&wait=false",
        "/api/v1/pop?namespace=&task=&wait=false",
        "/api/v1/pop/queue/fuzz?subscriptionFrom=not-a-date&consumerGroup=g&wait=false",
        "/api/v1/resources/queues/nope/depth?group=",
        "/api/v1/dlq?limit=abc",
        "/api/v1/kv/BAD/k",
        "/api/v1/messages?limit=abc",
        "/api/v1/messages?offset=99999999999999999999999",
        "/api/v1/messages?from=0001-01-01T00:00:00%2B01:00",
        "/api/v1/messages?to=99999-01-01&status=x",
        "/api/v1/messages/99999999999999999999999/t",
        "/api/v1/traces/names?offset=-1",
        "/api/v1/traces/by-name/x?limit=99999999999999999999&offset=99999999999999999999",
        "/api/v1/traces/99999999999999999999999/t",
        "/api/v1/consumer-groups/lagging?minLagSeconds=abc",
        "/api/v1/consumer-groups/lagging?minLagSeconds=99999999999999999999999",
        "/api/v1/resources/partitions?limit=0&offset=99999999999999999999",
        "/api/v1/pop/queue/fuzz?leaseSeconds=99999999999999999999&wait=false",
        "/api/v1/pop/queue/fuzz?subscriptionFrom=0001-01-01T00:00%2B14:00&wait=false",
        "/api/v1/pop/queue/fuzz?consumerGroup=a%00b&wait=false",
        "/api/v1/pop?namespace=%00&task=%00&wait=false",
        "/api/v1/dlq?offset=99999999999999999999&limit=99999999999999999999",
        "/api/v1/dlq?queue=%00&partition=%00&from=9999-12-31T23:59-14:00",
        "/api/v1/resources/queues/%00",
        "/api/v1/resources/queues/%00/depth?group=%00",
        "/api/v1/kv/fuzz/%ff",
    ],
)
def test_odd_query_strings_never_get_a_server_error(live_server, path):
    response = httpx.get(
        f"{live_server.url}{path}", headers={"Authorization": f"Bearer {live_server.token}"}, timeout=30
    )
    assert response.status_code < 500, response.text[:300]


@pytest.mark.parametrize("path", ["/api/v1/configure", "/api/v1/push", "/api/v1/ack", "/api/v1/ack/batch"])
def test_a_null_body_is_a_bad_request_on_the_engine_routes(live_server, path):
    response = httpx.post(
        f"{live_server.url}{path}",
        content=b"null",
        headers={"Authorization": f"Bearer {live_server.token}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json() == {"error": "the body must be a JSON object", "code": "bad_request"}
