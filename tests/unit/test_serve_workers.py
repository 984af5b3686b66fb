"""``serve``'s default number of worker processes."""

from __future__ import annotations

import os

import pytest
from django.test import override_settings

from queenadmin.management.commands import serve
from tests.conftest import IS_POSTGRES


@pytest.fixture
def eight_cores(monkeypatch, settings):
    settings.QUEENADMIN_WORKERS = 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)


@pytest.mark.usefixtures("eight_cores")
def test_directly_on_postgresql_a_worker_per_core_up_to_the_cap_and_one_on_sqlite():
    """Directly on PostgreSQL each worker costs server connections: one per
    core, at most DIRECT_WORKERS_CAP; SQLite is served by one process."""
    assert serve.DIRECT_WORKERS_CAP == 2
    assert serve.default_workers() == (2 if IS_POSTGRES else 1)


@pytest.mark.usefixtures("eight_cores")
@override_settings(QUEENADMIN_DB_POOLER="transaction")
def test_behind_a_transaction_pooler_a_worker_per_core():
    assert serve.default_workers() == (8 if IS_POSTGRES else 1)


@pytest.mark.usefixtures("eight_cores")
def test_a_single_core_gets_one_worker(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert serve.default_workers() == 1


def test_queenadmin_workers_sets_the_default(settings):
    """QUEENADMIN_WORKERS is the default when set, on either database (the
    environment reaches it through settings.py: tests/unit/test_settings_list.py)."""
    settings.QUEENADMIN_WORKERS = 5
    assert serve.default_workers() == 5
