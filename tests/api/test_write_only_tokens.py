"""Our API tokens of Queen's write-only level (issue 40): ``--scope write-only``.

Such a token pushes, schedules timers and pushes ephemeral messages, and
calls nothing that reads: it meets the very check a JWT of Queen's
write-only role meets (``api/bearer.py``'s ``require_level`` against
``api/routes.py``'s ``WRITE_ONLY``), so the walk below asks every route
with both and wants the same answer: ``403 Insufficient permissions`` in
our envelope, or through for the three write-only routes.
"""

from __future__ import annotations

import json
import time
from typing import Any

import jwt as pyjwt
import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from queenadmin.api import routes
from queenadmin.domain import tokens
from queenadmin.domain.identity.jwt import ROLE_LEVELS
from queenadmin.errors import InvalidArgument
from queenadmin.models import ApiToken
from tests.api.test_route_walk import TABLE, World, db_threads_closed, send

__all__ = ["db_threads_closed"]

SECRET = "write-only-token-tests-secret-of-at-least-thirty-two-bytes"
HS = {"QUEENADMIN_JWT_ENABLED": True, "QUEENADMIN_JWT_SECRET": SECRET, "QUEENADMIN_JWT_ALGORITHM": "HS256"}
REFUSED = {"error": "forbidden", "code": "forbidden", "detail": "Insufficient permissions"}
#: The route walk's placeholders: the calls below never reach a stored row.
NOWHERE = World(pid="1", opid="2", lease="no-lease", query_id="no-query", stored=(), did="1")


def bearer(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def write_only_jwt(sub: str) -> str:
    now = int(time.time())
    return pyjwt.encode({"sub": sub, "role": "write-only", "iat": now, "exp": now + 600}, SECRET, algorithm="HS256")


def post(client: Client, path: str, body: Any) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_its_levels_are_the_write_only_jwts():
    """One definition of what write-only passes, for both kinds of token."""
    assert tokens.WRITE_ONLY_LEVELS is ROLE_LEVELS["write-only"]


@pytest.mark.django_db(transaction=True)
@override_settings(**HS)
def test_every_route_answers_it_as_it_answers_a_write_only_jwt(db_threads_closed):
    """Each route of routes.ROUTES (its first case of the route walk), called
    by our write-only token and by a write-only JWT: the same status; 403
    ``Insufficient permissions`` in our envelope off ``routes.WRITE_ONLY``,
    a success on it."""
    ours = bearer(tokens.token_create(by=tokens.HOST, name="wo-walk", scope="write-only"))
    theirs = bearer(write_only_jwt("wo-walk-jwt"))
    problems: list[str] = []
    for route in routes.ROUTES:
        _, make, *_ = TABLE[route][0]
        method, path, params, body = make(NOWHERE)
        answers = [send(client, method, path, params, body) for client in (ours, theirs)]
        statuses = [a.status_code for a in answers]
        if route in routes.WRITE_ONLY:
            if not all(200 <= s < 300 for s in statuses):
                problems.append(f"{route}: {statuses}, not through: {answers[0].content[:200]!r}")
        elif statuses != [403, 403] or any(a.json() != REFUSED for a in answers):
            problems.append(f"{route}: {statuses} {answers[0].content[:200]!r}, not the level's 403")
    assert not problems, "\n".join(problems)


@pytest.mark.django_db(transaction=True)
def test_it_pushes_schedules_and_pushes_ephemeral_and_reads_nothing(db_threads_closed):
    """JWTs off (the default): the level is our token's own. What it pushed
    names it (producerSub) to a reader; it may not pop it back, nor read the
    metrics."""
    writer = bearer(tokens.token_create(by=tokens.HOST, name="wo-billing", scope="write-only"))
    pushed = post(writer, "/api/v1/push", {"items": [{"queue": "wo-q", "partition": "p", "payload": {"n": 1}}]})
    assert pushed.status_code == 201, pushed.content
    op = {"op": "schedule", "queue": "wo-q", "timerKey": "k", "txn": "t", "delayMs": 60_000, "payload": "e30="}
    assert post(writer, "/api/v1/timers", [op]).status_code == 200
    assert post(writer, "/api/v1/ephemeral/push", {"queue": "wo-e", "messages": [{"payload": 1}]}).status_code == 201
    for answer in (
        writer.get("/api/v1/pop/queue/wo-q?wait=false"),
        writer.get("/api/v1/ephemeral/pop?queue=wo-e"),
        writer.get("/api/v1/resources/queues"),
        post(writer, "/api/v1/configure", {"queue": "wo-q"}),
        post(writer, "/api/v1/transaction", {"operations": []}),
        writer.get("/metrics"),
    ):
        assert (answer.status_code, answer.json()) == (403, REFUSED), answer.content
    reader = bearer(tokens.token_create(by=tokens.HOST, name="wo-reader", scope="write"))
    popped = reader.get("/api/v1/pop/queue/wo-q?wait=false")
    assert [m["producerSub"] for m in popped.json()["messages"]] == ["wo-billing"]


@pytest.mark.django_db
def test_its_grants_give_at_most_write_and_still_limit_it():
    """Its grants' ceiling is write (what a push needs); a queue no grant
    covers is refused by the grants, as for any token."""
    with pytest.raises(InvalidArgument, match="gives more than the token's scope, write"):
        tokens.token_create(by=tokens.HOST, name="wo-admin", scope="write-only", grants=["queue:orders.*=admin"])
    writer = bearer(
        tokens.token_create(by=tokens.HOST, name="wo-orders", scope="write-only", grants=["queue:orders.*=write"])
    )
    assert post(writer, "/api/v1/push", {"items": [{"queue": "orders.eu", "payload": 1}]}).status_code == 201
    outside = post(writer, "/api/v1/push", {"items": [{"queue": "billing", "payload": 1}]})
    assert outside.status_code == 403
    assert "no grant" in outside.json()["detail"]


@pytest.mark.django_db
def test_apitoken_create_takes_write_only_and_list_shows_it(capsys):
    call_command("apitoken", "create", "wo-cli", "--scope", "write-only")
    secret = capsys.readouterr().out.strip().splitlines()[-1]
    auth = tokens.token_check(secret)
    assert auth == tokens.TokenAuth(
        "wo-cli", tokens.TokenScope.WRITE, producer_sub="wo-cli", levels=frozenset({"write-only"})
    )
    assert ApiToken.objects.get(name="wo-cli").scope == "write-only"
    call_command("apitoken", "list")
    assert capsys.readouterr().out.split("\t")[2:4] == ["write-only", "active"]
    with pytest.raises(InvalidArgument, match="one of read, write, admin, or write-only"):
        tokens.token_create(by=tokens.HOST, name="wo-bad", scope="write_only")
    # A grant's scope is a rung of the ladder: write-only is no grant.
    with pytest.raises(InvalidArgument, match="unknown scope 'write-only'"):
        tokens.token_create(by=tokens.HOST, name="wo-grant", scope="write", grants=["queue:a=write-only"])
