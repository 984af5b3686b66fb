"""Operating ``serve``: what it prints, how it fails, how it stops, /metrics, offline docs."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from html.parser import HTMLParser

import httpx
import pytest

from tests.conftest import IS_POSTGRES, ROOT, free_port, migrated_database, requires_postgres, run_server

pytestmark = pytest.mark.live

IN_PROGRESS_POPS = 'queenadmin_http_requests_in_progress{route="pop"}'
KV_200 = 'queenadmin_http_requests_total{route="kv",status="200"}'


def _serve_once(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py serve`` expected to give up at start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["QUEENADMIN_DATA_DIR"] = tempfile.mkdtemp(prefix="qa-ops-")
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "manage.py", "serve", "--port", str(free_port()), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _stop(server, sig=signal.SIGTERM) -> int:
    server.process.send_signal(sig)
    return server.process.wait(timeout=15)


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=requires_postgres)])
def test_a_stop_signal_the_moment_serve_listens_stops_it(workers, tmp_path):
    """A SIGTERM between serve's own signal handlers and uvicorn's (here:
    sent by tests/stophook as uvicorn's server or supervisor is about to
    take the signals) is kept and handed on: serve stops and says "stopped".
    It was once dropped, and a supervisor of two workers served on for good
    (seen as a stop right after "serving on" under load)."""
    env = {"PYTHONPATH": str(ROOT / "tests" / "stophook"), "QUEENADMIN_DATA_DIR": str(tmp_path)}
    if IS_POSTGRES:
        env["DJANGO_SECRET_KEY"] = "stop-test-key"
    # A migrated database: what is tested comes after migrating.
    with migrated_database(env):
        done = _serve_once(env, "--workers", str(workers))
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert said.splitlines()[-1] == "stopped", said


# --------------------------------------------------------------------------
# What serve prints


def test_the_banner_says_what_runs_and_serving_on_comes_once_listening():
    with run_server() as server:
        lines = server.log().splitlines()
        assert re.fullmatch(r"queenadmin \S+", lines[0])
        assert lines[1].split(":", 1)[0].strip() == "database"
        assert lines[1].split(":", 1)[1].strip().startswith(("sqlite:///", "postgresql://"))
        assert lines[2].split(":", 1)[0].strip() == "channel layer"
        assert re.fullmatch(r"\s+workers:\s+1, \d+ HTTP threads each", lines[3])
        assert lines[4] == "applying migrations…"
        assert lines[5] == f"serving on {server.url}/ (Ctrl-C stops)"
        # No access log unless asked for, no traceback, nothing else.
        assert len(lines) == 6, lines
        assert _stop(server) == 0
        assert server.log().splitlines()[-1] == "stopped", server.log()


def test_an_unreachable_database_is_one_line_and_exit_1():
    done = _serve_once({"DATABASE_URL": f"postgresql://someone:sekret@127.0.0.1:{free_port()}/nothing"})
    assert done.returncode == 1
    errors = done.stderr.strip().splitlines()
    assert errors[-1].startswith("cannot reach the database postgresql://someone@127.0.0.1:")
    assert "Traceback" not in done.stderr
    assert "sekret" not in done.stderr + done.stdout
    assert "serving on" not in done.stderr


def test_an_unreachable_redis_is_one_line_and_exit_1():
    port = free_port()
    done = _serve_once({"REDIS_URL": f"redis://:sekret@127.0.0.1:{port}/0"})
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"cannot reach Redis at redis://127.0.0.1:{port}/0: ")
    assert "channel layer: redis, redis://127.0.0.1:" in done.stderr
    assert "Traceback" not in done.stderr
    assert "sekret" not in done.stderr + done.stdout


def test_a_taken_port_is_one_line_and_exit_1():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env["QUEENADMIN_DATA_DIR"] = tempfile.mkdtemp(prefix="qa-ops-")
        done = subprocess.run(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"cannot listen on 127.0.0.1 port {port}: Address already in use"
    assert "serving on" not in done.stderr
    assert "Traceback" not in done.stderr


def test_json_logs_and_the_access_log():
    """``QUEENADMIN_LOG_FORMAT=json``: every line is a JSON object, the
    access log (``--access-log``) with the request's fields."""
    with run_server(extra_env={"QUEENADMIN_LOG_FORMAT": "json"}, args=("--access-log",)) as server:
        httpx.get(f"{server.url}/health")
        assert _stop(server) == 0
        lines = [json.loads(line) for line in server.log().splitlines()]
    assert lines[0]["message"].startswith("queenadmin ")
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    assert lines[-1]["message"] == "stopped"
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    assert {"method": "GET", "path": "/health", "status": 200}.items() <= access[0].items()


# --------------------------------------------------------------------------
# Stopping


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_answers_waiting_pops_and_exits(sig):
    """Pops waiting 30 s are answered 204 at once; the server exits within 5 s."""
    with run_server() as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        answers: list[int] = []

        def pop() -> None:
            response = httpx.get(
                f"{server.url}/api/v1/pop/queue/idle?wait=true&timeout=30000", headers=headers, timeout=60
            )
            answers.append(response.status_code)

        threads = [threading.Thread(target=pop) for _ in range(3)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while _samples(_scrape(server, server.token).text).get(IN_PROGRESS_POPS) != 3:
            assert time.monotonic() < deadline, "the pops never arrived"
            time.sleep(0.1)
        assert answers == []
        stopped_at = time.monotonic()
        server.process.send_signal(sig)
        assert server.process.wait(timeout=5) == 0
        for thread in threads:
            thread.join(timeout=5)
        assert time.monotonic() - stopped_at < 5
        assert answers == [204, 204, 204]
        assert server.log().splitlines()[-1] == "stopped", server.log()


# --------------------------------------------------------------------------
# /metrics


def _scrape(server, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{server.url}/metrics", headers=headers)


def _samples(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def test_metrics_need_an_api_token(live_server):
    server = live_server
    # Two spaces after Bearer: no token, as on every API route.
    doubled = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer  {server.token}"})
    for refused in (_scrape(server), _scrape(server, "qa_not-a-token"), doubled):
        assert refused.status_code == 401
        assert refused.json() == {
            "error": "unauthorized",
            "code": "unauthorized",
            "detail": "A valid bearer token is required.",
        }
    answer = _scrape(server, server.token)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")


def test_metrics_count_requests_and_read_the_store():
    with run_server(extra_env={"QUEENADMIN_METRICS_STORE_SECONDS": "0"}) as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=headers) as client:
            for n in range(5):
                put = {"op": "put", "ns": "metrics-demo", "key": f"k{n}", "value": n, "forever": True}
                assert client.post("/api/v1/kv", json={"operations": [put]}).status_code == 200
            assert client.post("/api/v1/kv", json={"operations": [{"op": "nope"}]}).status_code == 400
            pushed = client.post(
                "/api/v1/push",
                json={"items": [{"queue": "metered", "payload": {"n": n}} for n in range(3)]},
            )
            assert pushed.status_code == 201
            popped = client.get("/api/v1/pop/queue/metered?batch=1&wait=false")
            assert popped.status_code == 200
            lock = client.post(
                "/api/v1/locks", json={"operations": [{"op": "acquire", "name": "metered-lock", "ttlSeconds": 60}]}
            )
            assert lock.json()["results"][0]["acquired"] is True
            timer = client.post(
                "/api/v1/timers",
                json={
                    "operations": [
                        {
                            "op": "schedule",
                            "queue": "metered",
                            "timerKey": "t1",
                            "txn": "tx-1",
                            "payload": "e30=",
                            "delayMs": 3_600_000,
                        }
                    ]
                },
            )
            assert timer.status_code == 200, timer.text
        samples = _samples(_scrape(server, server.token).text)
    assert samples['queenadmin_http_requests_total{route="kv",status="200"}'] == 5
    assert samples['queenadmin_http_requests_total{route="kv",status="400"}'] == 1
    assert samples['queenadmin_http_requests_total{route="push",status="201"}'] == 1
    assert samples['queenadmin_http_requests_total{route="pop",status="200"}'] == 1
    assert samples['queenadmin_http_request_duration_seconds_count{route="kv"}'] == 6
    assert samples['queenadmin_http_request_duration_seconds_bucket{le="+Inf",route="kv"}'] == 6
    assert samples['queenadmin_kv_rows{namespace="metrics-demo"}'] == 5
    assert samples['queenadmin_queue_depth{queue="metered"}'] == 3
    assert samples['queenadmin_queue_in_flight{queue="metered"}'] == 1
    assert samples['queenadmin_queue_dead_letters{queue="metered"}'] == 0
    assert samples['queenadmin_queue_oldest_ready_age_seconds{queue="metered"}'] > 0
    # Ours, the timer loop's permit of queenadmin.timers and the sampler's
    # of queenadmin.sampler.
    assert samples["queenadmin_locks_held"] == 3
    assert samples["queenadmin_timers_pending"] == 1
    assert samples["queenadmin_timers_overdue_seconds"] == 0
    assert samples["queenadmin_workers"] == 1
    # The scrape itself.
    assert samples['queenadmin_http_requests_in_progress{route="metrics"}'] == 1
    assert samples[IN_PROGRESS_POPS] == 0
    for loop in ("reaper", "timers"):
        assert samples[f'queenadmin_loop_steps_total{{loop="{loop}"}}'] >= 1
        assert samples[f'queenadmin_loop_last_success_timestamp_seconds{{loop="{loop}"}}'] > 0


def _both_workers_counted(samples: dict[str, float], calls: int) -> bool:
    return samples.get(KV_200) == calls and samples.get("queenadmin_workers") == 2


@requires_postgres
def test_metrics_sum_every_worker():
    """``--workers 2``: any worker's scrape counts the requests of both."""
    with run_server(workers=2) as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        calls = 40
        for n in range(calls):
            # A fresh connection per call: the kernel hands each to either worker.
            put = {"op": "put", "ns": "workers-metrics", "key": f"k{n}", "value": n, "forever": True}
            assert httpx.post(f"{server.url}/api/v1/kv", json={"operations": [put]}, headers=headers).status_code == 200
        # A worker writes its counts every METRICS_FLUSH_SECONDS (1 s) and
        # before it answers a scrape: the scrape sees its own worker's at
        # once and the other's within a second (1.5 s allowed, as the
        # sleep this wait replaced).
        # Both seen: one worker may have answered every call.
        deadline = time.monotonic() + 1.5
        while not _both_workers_counted(_samples(_scrape(server, server.token).text), calls):
            assert time.monotonic() < deadline, "the other worker's counts never came"
            time.sleep(0.1)
        for _ in range(6):
            samples = _samples(_scrape(server, server.token).text)
            assert samples[KV_200] == calls
            assert samples["queenadmin_workers"] == 2
            assert samples['queenadmin_kv_rows{namespace="workers-metrics"}'] == calls


# --------------------------------------------------------------------------
# The API docs


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # What the page loads (scripts, styles, icons, pictures); a link is
        # followed only when clicked.
        if tag != "a":
            self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def test_the_api_docs_load_nothing_from_other_hosts(live_server):
    page = httpx.get(f"{live_server.url}/api/v1/docs")
    assert page.status_code == 200
    links = _Links()
    links.feed(page.text)
    assert any(url.endswith("swagger-ui-bundle.js") for url in links.urls)
    for url in links.urls:
        assert "//" not in url, url
        assert httpx.get(f"{live_server.url}{url}").status_code == 200, url
