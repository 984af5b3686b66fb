"""Fixtures of the overview, queues and search pages: users and log data.

Data is made through the domain (push, claim, ack, configure), never by
writing rows behind its back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.dashboard.permissions import OPERATORS_GROUP, VIEWERS_GROUP
from queenadmin.domain import queues
from queenadmin.plumbing.db import json_text
from tests.roles import role_group


@pytest.fixture
def make_client(db: None) -> Callable[..., Client]:
    """A logged-in client: ``make_client("viewer")``, ``("operator")``, ``("staff")`` (no group), ``("user")``."""
    made = 0

    def make(role: str, *, csrf: bool = False) -> Client:
        nonlocal made
        made += 1
        user = User.objects.create_user(f"{role}{made}", password="pw", is_staff=role != "user")
        if role in ("viewer", "operator"):
            user.groups.add(role_group(VIEWERS_GROUP if role == "viewer" else OPERATORS_GROUP))
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def viewer(make_client: Callable[..., Client]) -> Client:
    return make_client("viewer")


@pytest.fixture
def operator(make_client: Callable[..., Client]) -> Client:
    return make_client("operator")


def push(queue: str = "q", n: int = 1, partition: str = queues.DEFAULT_PARTITION, payload: Any = None) -> list[Any]:
    items = [
        queues.PushItem(queue, partition, json_text(payload if payload is not None else {"i": i}), None)
        for i in range(n)
    ]
    return queues.queue_push(items=items)


def claim(queue: str = "q", **kw: Any) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, **kw))


def ack(c: queues.Claim, status: str = "completed", error: str | None = None) -> Any:
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), status, c.lease_id, error, c.group)  # type: ignore[arg-type]
        for i, m in enumerate(c.messages)
    ]
    return queues.queue_ack(items=items)


def configure(name: str = "q", **options: Any) -> queues.QueueConfig:
    request = queues.ConfigureRequest(name, options=queues.QueueOptions(tuple(options.items())))
    return queues.queue_configure(request=request)


def dead_letter(queue: str = "q", n: int = 1, partition: str = queues.DEFAULT_PARTITION, error: str = "boom") -> None:
    """Push ``n`` messages and send them straight to the DLQ (ack ``dlq``)."""
    push(queue, n, partition)
    c = claim(queue, partition=partition, batch=n)
    assert len(c.messages) == n
    ack(c, "dlq", error)
