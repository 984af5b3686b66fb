"""Schemathesis over the published OpenAPI documents, against a live ``serve``.

Every operation of ``/api/v1/openapi.json`` and ``/streams/v1/openapi.json``
gets generated requests (its examples, the coverage phase, bounded fuzzing
and stateful sequences) with the API token, under every check (``--checks
all``): no answer may be a 5xx or off its schema, a request the document
allows must not be refused, and one it forbids must be. So the request
schemas say what the parsers accept (both come from one declaration,
api/wire/fields.py). What JSON Schema cannot say is kept by the hooks of
``schemathesis_hooks.py`` (rules across a call's items; pops wait
briefly); ``schemathesis.toml`` counts a 413 as a refusal, and has
the coverage phase ask each path three of the methods it does not declare,
not all eight (the router refuses them all in one place). A whole float
(``2.0``) is an integer, as JSON Schema says and the parsers read it.

Bounded (``MAX_EXAMPLES`` per operation, a fixed seed): 15 at
``QA_SCALE=ci``, 60 at ``full`` (tests/scale.py, ``make soak``). The run is
the client's CPU (schemathesis and Hypothesis, three quarters of it), so the
operations are checked in two halves of about equal cost, each in its own
CI leg on PostgreSQL (.ci/run; docs/testing.md has the figures): the message
log's (``MESSAGE_LOG``) here, through the pooler; the API's others and the
``/streams/v1`` document's in ``test_schemathesis_rest.py``, directly.
``QA_SCHEMATHESIS_ARGS`` adds options to the run, such as ``--include-tag
kv`` to check one concept's operations.
It found two 500s of issue 13's kind (a timer op that was an object, NUL
in timer names on PostgreSQL), and with ``--checks all`` 22 requests the
document and the parsers disagreed on (3 more in ``/streams/v1``'s).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scale import scaled, sized

pytestmark = [pytest.mark.live, scaled]

MAX_EXAMPLES = sized(ci=15, full=60)


#: The tags of the message log's operations: the API's half checked here.
MESSAGE_LOG = ("queues", "client routes", "status")
API = "/api/v1/openapi.json"


def tags(option: str) -> list[str]:
    """``option`` (``--include-tag`` or ``--exclude-tag``) for each of ``MESSAGE_LOG``."""
    return [word for tag in MESSAGE_LOG for word in (option, tag)]


def run_schemathesis(live_server: Any, tmp_path: Path, document: str, selection: list[str]) -> None:
    """Run schemathesis over ``document``'s operations that ``selection`` picks."""
    here = Path(__file__).parent
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(here / "schemathesis.toml"),
        "run",
        f"{live_server.url}{document}",
        "--header",
        f"Authorization: Bearer {live_server.token}",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        "13",
        "--no-color",
        # Shrinking can strip a negative case down to a valid request and still
        # report it as "schema-violating request accepted" (schemathesis
        # issue 4332; seen here as "Invalid component: positive test case").
        "--no-shrink",
        # Hypothesis's example database in the scratch folder, as before its
        # storage moved (below): a run replays nothing of an earlier one.
        "--generation-database",
        str(tmp_path / "examples"),
        *selection,
        *shlex.split(os.environ.get("QA_SCHEMATHESIS_ARGS", "")),
    ]
    # In a scratch folder: the CLI keeps a .schemathesis cache where it runs.
    # Hypothesis's Unicode tables (about 2 s of CPU to build) stay in the
    # checkout's .hypothesis, as for the rest of the suite, not rebuilt in
    # each run's scratch folder.
    root = here.parent.parent
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks",
        "PYTHONPATH": str(root),
        "HYPOTHESIS_STORAGE_DIRECTORY": str(root / ".hypothesis"),
    }
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Internal Server Error" not in live_server.log()


def test_generated_requests_get_answers_their_schema_promises(live_server, tmp_path):
    run_schemathesis(live_server, tmp_path, API, tags("--include-tag"))
