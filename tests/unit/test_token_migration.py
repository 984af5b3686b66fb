"""Migration 0013: tokens made before scopes keep every right they had."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from queenadmin.domain import clock

BEFORE = [("queenadmin", "0012_traces")]
AFTER = [("queenadmin", "0013_token_scopes")]


@pytest.mark.django_db(transaction=True)
def test_existing_tokens_become_admin_and_new_ones_default_to_write():
    """A token that could delete queues yesterday still can; a new one is write."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old_apps = executor.loader.project_state(BEFORE).apps
        OldToken = old_apps.get_model("queenadmin", "ApiToken")
        OldToken.objects.create(name="old", token_hash="a" * 64, prefix="qa_old", created_at=clock.now())
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        new_apps = executor.loader.project_state(AFTER).apps
        NewToken = new_apps.get_model("queenadmin", "ApiToken")
        assert NewToken.objects.get(name="old").scope == "admin"
        created = NewToken.objects.create(name="new", token_hash="b" * 64, prefix="qa_new", created_at=clock.now())
        assert created.scope == "write"
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
