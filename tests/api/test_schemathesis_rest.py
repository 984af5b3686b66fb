"""Schemathesis over the operations outside the message log.

The second half of ``test_schemathesis.py``'s run (see there), in the CI leg
on PostgreSQL directly while the first runs through the pooler: the API's
KV, locks, timers, transactions, ephemeral queues and history, and Queen's
``/streams/v1`` routes (their own document).
"""

from __future__ import annotations

import pytest

from tests.api.test_schemathesis import API, run_schemathesis, tags
from tests.scale import scaled

pytestmark = [pytest.mark.live, scaled]

RUNS = {"api": (API, tags("--exclude-tag")), "streams": ("/streams/v1/openapi.json", [])}


@pytest.mark.parametrize("run", RUNS)
def test_generated_requests_get_answers_their_schema_promises(live_server, tmp_path, run):
    run_schemathesis(live_server, tmp_path, *RUNS[run])
