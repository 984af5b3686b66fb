"""A lock used through two replicas of one database (issue 41)."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from tests.conftest import requires_postgres, run_server

pytestmark = pytest.mark.live


def _locks(url: str, token: str, op: dict[str, object]) -> dict[str, object]:
    answer = httpx.post(f"{url}/api/v1/locks", json={"operations": [op]}, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    result: dict[str, object] = answer.json()["results"][0]
    return result


def _holds(url: str, token: str) -> tuple[float, float]:
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
    found = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^queenadmin_lock_hold_seconds_(count|sum)(?:\{[^}]*\})? (\S+)$", text, re.M)
    }
    return found.get("count", 0.0), found.get("sum", 0.0)


@requires_postgres
def test_a_release_through_another_replica_is_timed(live_server, unique):
    """Acquired through one server and released through another: the
    other's ``queenadmin_lock_hold_seconds`` observes the hold, and the
    lock's history answers the release with its ``heldMs``."""
    name = unique("replica-lock")
    token = live_server.token
    with run_server(extra_env={"DATABASE_URL": live_server.env["DATABASE_URL"]}) as other:
        count, total = _holds(other.url, token)
        granted = _locks(live_server.url, token, {"op": "acquire", "name": name, "ttlSeconds": 60, "owner": "o"})
        assert granted["acquired"] is True
        time.sleep(0.4)
        released = _locks(other.url, token, {"op": "release", "name": name, "token": granted["token"]})
        assert released["released"] is True
        after_count, after_total = _holds(other.url, token)
        assert after_count == count + 1
        assert after_total - total >= 0.4
        events = httpx.get(
            f"{other.url}/api/v1/history/locks/{name}", headers={"Authorization": f"Bearer {token}"}
        ).json()["events"]
    assert [e["event"] for e in events] == ["released", "acquired"]
    assert events[0]["heldMs"] >= 400
