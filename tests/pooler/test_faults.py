"""Faults behind a transaction pooler (issue 25).

PostgreSQL restarted under load through PgBouncer, and Redis stopped and
started while serving. Each test runs its own PostgreSQL, PgBouncer and
Redis (tests/pooler/cluster.py): the shared ones on 5432 and 6379 are never
stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.pooler.cluster import (
    migrated_database,
    pooled_env,
    private_bouncer,
    private_postgres,
    private_redis,
    replicas,
)
from tests.pooler.load import Load, Shape

pytestmark = pytest.mark.live

#: The answers a client may see while PostgreSQL restarts: the call's own,
#: or 503 ("retry"). Never a 500, never no answer.
OK = {200, 201, 204}
#: Within this many seconds of the restart's start every call succeeds again.
RECOVERY_SECONDS = 5.0


@pytest.fixture
def bounced():
    """A private PostgreSQL behind PgBouncer, with a migrated database;
    yields (postgres, pgbouncer, admin token). fsync is off: a fast restart
    is a clean shutdown, which writes everything out (an immediate one with
    asynchronous commits loses acknowledged writes, and this test says so),
    and a shutdown checkpoint synced to a shared disk took up to 2 s."""
    with private_postgres() as pg, private_bouncer(pg) as bouncer:
        yield pg, bouncer, migrated_database(pg)


async def test_postgresql_restarted_under_load_through_pgbouncer_loses_no_acknowledged_write(bounced):
    """Six writers (KV put + incr, pushes) on 2 workers through PgBouncer;
    PostgreSQL restarts (fast) in the middle: calls answer 503 for a moment,
    never 500; within 5 s of the restart every call succeeds again; every
    acknowledged put and push is there afterwards, and the shared counter
    holds every acknowledged incr (and no more than were sent)."""
    pg, bouncer, token = bounced
    shape = Shape(
        kv_writers=3,
        lock_names=0,
        semaphore_holders=0,
        pushers=3,
        txn_writers=0,
        timer_schedulers=0,
        poppers=0,
    )
    with replicas(1, pooled_env(pg, bouncer), workers=2) as servers:
        load = Load([s.url for s in servers], token, shape)
        running = asyncio.ensure_future(load.run(RECOVERY_SECONDS + 4.0))
        await asyncio.sleep(2.0)
        restart_began = time.monotonic()
        await asyncio.to_thread(pg.restart)
        restarted = time.monotonic()
        out = await running
        log = servers[0].log()

    failed = [c for c in out.calls if c.status not in OK]
    last_failed = max((c.ended for c in failed), default=restart_began) - restart_began
    longest = max(out.calls, key=lambda c: c.ended - c.started)
    print(
        f"postgres restart: pg_ctl restart took {restarted - restart_began:.2f} s; {len(failed)} calls failed,"
        f" the last answered {last_failed:.2f} s after the restart began; the longest call took"
        f" {longest.ended - longest.started:.2f} s; {out.statuses()}; acknowledged {len(out.kv_acked)} puts,"
        f" {out.incr_acked} incrs, {len(out.pushed)} pushes"
    )
    assert {c.status for c in failed} <= {503}, (out.by_kind(), log)
    assert all(c.started >= restart_began - 0.5 for c in failed), "calls failed before the restart"
    # Answering again within 5 s: no failure after that, no call held that long.
    assert last_failed < RECOVERY_SECONDS, [c for c in failed if c.ended - restart_began >= RECOVERY_SECONDS][:5]
    assert longest.ended - longest.started < RECOVERY_SECONDS, longest
    after = [c for c in out.calls if c.started > restart_began + RECOVERY_SECONDS and c.kind != "verify"]
    assert len(after) > 6, "the writers stopped early"
    assert all(c.status in OK for c in after)

    assert out.kv_acked
    assert out.pushed
    assert not out.kv_missing, out.kv_missing[:20]
    assert not out.kv_wrong, out.kv_wrong[:20]
    assert not out.undelivered()["soak-push"], out.undelivered()["soak-push"][:20]
    assert out.counter_value is not None
    assert out.incr_acked <= out.counter_value <= out.incr_acked + out.incr_unknown


# -- Redis ---------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
OPERATOR = """
from django.contrib.auth.models import Group, User
user = User.objects.create_user("otto", password="pw", is_staff=True)
user.groups.add(Group.objects.get(name="queenadmin operators"))
"""


#: Keeps every state the live badge takes (window.badgeStates).
WATCH_BADGE = """() => {
  window.badgeStates = [];
  const badge = document.getElementById("live-badge");
  new MutationObserver(() => window.badgeStates.push(badge.dataset.state))
    .observe(badge, {attributes: true, attributeFilter: ["data-state"]});
}"""


class Writer(threading.Thread):
    """KV puts, one after the other, into a namespace of their own; keeps
    every answer's (time, status) and every acknowledged key."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(name="kv-writer", daemon=True)
        self.client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        self.answers: list[tuple[float, int]] = []
        self.acked: dict[str, int] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            op = {"op": "put", "ns": "outage-load", "key": f"k{n}", "value": n, "forever": True}
            try:
                answer = self.client.post("/api/v1/kv", json={"operations": [op]})
            except httpx.HTTPError:
                self.answers.append((time.monotonic(), 0))
                continue
            self.answers.append((time.monotonic(), answer.status_code))
            if answer.status_code == 200 and answer.json()["results"][0]["applied"]:
                self.acked[f"k{n}"] = n
            self.stopping.wait(0.02)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)

    def close(self) -> None:
        self.stop()
        self.client.close()

    def missing(self) -> list[str]:
        keys = sorted(self.acked)
        missing = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            answer = self.client.post(
                "/api/v1/kv", json={"operations": [{"op": "getMany", "ns": "outage-load", "keys": chunk}]}
            )
            assert answer.status_code == 200
            rows = {row["key"]: row["value"] for row in answer.json()["results"][0]["rows"]}
            missing += [key for key in chunk if rows.get(key) != self.acked[key]]
        return missing


def _put(url: str, token: str, key: str) -> None:
    answer = httpx.put(
        f"{url}/api/v1/kv/outage/{key}",
        json={"value": key, "forever": True},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"this test needs {CHROMIUM} (.ci/install-system installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def with_redis():
    """A private PostgreSQL behind PgBouncer and a private Redis, a migrated
    database with an operator (otto); yields (postgres, pgbouncer, redis,
    admin token)."""
    with private_postgres() as pg, private_bouncer(pg) as bouncer, private_redis() as redis:
        yield pg, bouncer, redis, migrated_database(pg, then=OPERATOR)


def test_redis_stopped_and_started_while_serving(with_redis, browser, monkeypatch):
    """With Redis gone the API goes on answering every call; the dashboard's
    badge leaves "live" and does not come back to it while Redis is down
    (reconnecting, then stale after 30 s on the page's clock); with Redis
    back it is live again, shows the write made while Redis was down, and a
    new write appears without a reload. Every acknowledged write is there."""
    from playwright.sync_api import expect

    # Playwright's sync API runs an event loop in this thread.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    pg, bouncer, redis, token = with_redis
    env = {**pooled_env(pg, bouncer), "REDIS_URL": redis.url}
    with replicas(1, env, workers=2) as (server,), contextlib.ExitStack() as stack:
        writer = Writer(server.url, token)
        writer.start()
        stack.callback(writer.close)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        stack.callback(context.close)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{server.url}/login/")
        page.fill("input[name=username]", "otto")
        page.fill("input[name=password]", "pw")
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/")
        # A clock the test can move: "stale since" comes after 30 s down.
        page.clock.install()
        page.goto(f"{server.url}/kv/outage/")
        badge = page.locator("#live-badge")
        expect(badge).to_have_text("live")
        _put(server.url, token, "before")
        expect(page.locator('tr[data-key="before"]')).to_have_count(1)

        page.evaluate(WATCH_BADGE)
        redis.stop()
        down_at = time.monotonic()
        expect(badge).to_have_attribute("data-state", "reconnecting")
        _put(server.url, token, "during")
        # Real time for several of the socket's retries, then 31 s on the page's clock.
        time.sleep(2.0)
        page.clock.fast_forward("00:31")
        expect(badge).to_have_attribute("data-state", "stale")
        expect(badge).to_have_text(re.compile(r"^stale since \d\d:\d\d:\d\d UTC$"))
        time.sleep(1.0)  # more retries: still not live
        while_down = page.evaluate("window.badgeStates")
        up_at = time.monotonic()
        redis.start()

        # The socket's next retry is up to 4 s away on the page's clock.
        page.clock.fast_forward("00:05")
        expect(badge).to_have_text("live", timeout=30_000)
        expect(page.locator('tr[data-key="during"]')).to_have_count(1)
        _put(server.url, token, "after")
        expect(page.locator('tr[data-key="after"]')).to_have_count(1)
        writer.stop()
        missing = writer.missing()
        log = server.log()

    answered_down = [status for at, status in writer.answers if down_at <= at <= up_at]
    print(
        f"redis outage: {len(answered_down)} puts while down, statuses {set(answered_down)};"
        f" {len(writer.acked)} acked; badge while down {while_down}"
    )
    # Never "live" while Redis was down: reconnecting, then stale.
    assert "live" not in while_down, while_down
    assert "stale" in while_down, while_down
    assert answered_down, "the writer made no call while Redis was down"
    assert set(answered_down) == {200}, log
    assert {status for _, status in writer.answers} == {200}
    assert not missing, missing[:20]
