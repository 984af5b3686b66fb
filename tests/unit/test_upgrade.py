"""Migrations 0001-0014 squashed into one: what each earlier database gets.

The test database was made by the squashed migration, which records itself
and every migration it replaces; each test removes some of those records
(inside the test's transaction, so they come back) to stand for a database
an earlier queenadmin left behind.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from queenadmin import upgrade

SQUASHED = ("queenadmin", upgrade.SQUASHED.rsplit(".", 1)[1])


def _forget(*names: tuple[str, str]) -> None:
    recorder = MigrationRecorder(connection)
    for app, name in names:
        recorder.record_unapplied(app, name)


def _after_the_squash() -> list[tuple[str, str]]:
    """The migrations after the squashed one: no earlier queenadmin's database has them."""
    squashed = {SQUASHED, *upgrade.replaced()}
    recorded = MigrationRecorder(connection).applied_migrations()
    return [key for key in recorded if key[0] == "queenadmin" and key not in squashed]


def _queenadmin_plan() -> list[str]:
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [migration.name for migration, _ in plan if migration.app_label == "queenadmin"]


@pytest.mark.django_db
def test_a_database_an_earlier_queenadmin_migrated_to_the_end_has_nothing_to_apply():
    """Every one of 0001-0014 applied, the squashed one never recorded: it counts as applied."""
    _forget(SQUASHED)
    assert upgrade.partly_applied("default") == []
    assert _queenadmin_plan() == []
    assert SQUASHED in MigrationExecutor(connection).loader.applied_migrations


@pytest.mark.django_db
def test_a_partly_migrated_database_is_refused_with_what_to_do():
    """Up to 0012 only: migrate stops before it changes anything and names the way through."""
    _forget(
        SQUASHED,
        ("queenadmin", "0013_token_scopes"),
        ("queenadmin", "0014_kv_lock_and_read_function"),
        *_after_the_squash(),
    )
    assert upgrade.partly_applied("default")[-1] == "0012_traces"
    with pytest.raises(CommandError) as refused:
        call_command("migrate", interactive=False, verbosity=0)
    message = str(refused.value)
    assert "up to 0012_traces" in message
    assert f"commit {upgrade.LAST_UNSQUASHED}" in message
    recorded = MigrationRecorder(connection).applied_migrations()
    assert ("queenadmin", "0013_token_scopes") not in recorded


@pytest.mark.django_db
def test_the_squash_replaces_every_earlier_migration_in_order():
    """The list the guard reads is the squashed migration's own ``replaces``."""
    executor = MigrationExecutor(connection)
    squashed = executor.loader.disk_migrations[SQUASHED]
    assert list(squashed.replaces) == upgrade.replaced()
    assert upgrade.replaced()[0] == ("queenadmin", "0001_initial")
    assert upgrade.replaced()[-1] == ("queenadmin", "0014_kv_lock_and_read_function")


@pytest.mark.django_db
def test_the_models_and_the_migrations_agree():
    """A model changed without its migration fails here, not on a user's database."""
    call_command("makemigrations", "queenadmin", check=True, dry_run=True, verbosity=0)
