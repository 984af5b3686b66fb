"""The queue store's LISTEN on PostgreSQL: every committed wake-up heard,
and a lost connection ends the listen (the hub then listens again)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from django.db import connection

from queenadmin.domain.queues.store import CHANNEL, store
from tests.conftest import requires_postgres

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def _conninfo() -> str:
    params = store().listen_params() or {}
    return psycopg.conninfo.make_conninfo(**params)


async def test_every_committed_wake_up_is_heard_and_a_rolled_back_one_is_not():
    heard: list[str] = []
    ready = asyncio.Event()
    task = asyncio.create_task(store().listen(store().listen_params() or {}, ready=ready.set, woken=heard.append))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        async with await psycopg.AsyncConnection.connect(_conninfo(), autocommit=True) as other:
            for n in range(5):
                await other.execute("SELECT pg_notify(%s, %s)", [CHANNEL, f"q{n}"])
            async with other.transaction(force_rollback=True):
                await other.execute("SELECT pg_notify(%s, 'rolled back')", [CHANNEL])
            # Several in one transaction arrive together, in one read.
            async with other.transaction():
                await other.execute("SELECT pg_notify(%s, 'é1'), pg_notify(%s, 'é2')", [CHANNEL, CHANNEL])
        for _ in range(100):
            if len(heard) >= 7:
                break
            await asyncio.sleep(0.05)
        assert heard == ["q0", "q1", "q2", "q3", "q4", "é1", "é2"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_lost_connection_ends_the_listen():
    ready = asyncio.Event()
    task = asyncio.create_task(store().listen(store().listen_params() or {}, ready=ready.set, woken=lambda _: None))
    await asyncio.wait_for(ready.wait(), 10)
    async with await psycopg.AsyncConnection.connect(_conninfo(), autocommit=True) as other:
        await other.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s AND datname = %s",
            [f"LISTEN {CHANNEL}", connection.settings_dict["NAME"]],
        )
    with pytest.raises(psycopg.OperationalError):
        await asyncio.wait_for(task, 10)
