"""Schemathesis over the published OpenAPI document, against a live ``serve``.

Every operation of ``/api/v1/openapi.json`` gets generated requests (its
examples, the coverage phase, bounded fuzzing and stateful sequences) with
the API token; no answer may be a 5xx. Bounded (``MAX_EXAMPLES`` per
operation, a fixed seed) so that it fits in CI on both databases: 15 at
``QA_SCALE=ci``, 60 at ``full`` (tests/scale.py, ``make soak``). It found two 500s of issue 13's
kind: a timer op that was an object, and NUL in timer names on PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.scale import scaled, sized

pytestmark = [pytest.mark.live, scaled]

MAX_EXAMPLES = sized(ci=15, full=60)


def test_no_generated_request_gets_a_server_error(live_server, tmp_path):
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{live_server.url}/api/v1/openapi.json",
        "--header",
        f"Authorization: Bearer {live_server.token}",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        "13",
        "--no-color",
    ]
    # In a scratch folder: the CLI keeps a .schemathesis cache where it runs.
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Internal Server Error" not in live_server.log()
