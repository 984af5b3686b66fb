"""The one fixture queen-mq 2.6.0's own tests need, pointed at our server.

``bench/queen_client_suite.py`` copies this file as ``conftest.py`` beside
the tests it unpacks from the ``queen-mq`` sdist (which ships none). The
tests ask for a single fixture, ``client``: the official client for the
server under test, one per test, closed after it. The tests that call the
API with httpx read the server's address from ``QUEEN_URL`` or
``QUEEN_SERVER_URL``, which the runner sets to the same server. Nothing
else is provided: no cleanup, no retries, no token (the server runs with
``QUEENADMIN_OPEN_API=1``, as a Queen broker without JWT answers), so the
tests check exactly what they check against Queen itself.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from queen import Queen


@pytest.fixture
async def client() -> AsyncIterator[Queen]:
    queen = Queen(os.environ["QUEEN_URL"])
    try:
        yield queen
    finally:
        await queen.close()
