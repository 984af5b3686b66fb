"""The suite's own flush (tests/conftest.py): a transactional test leaves no row behind.

The first test writes rows in several tables, through the domain and
through a related row an empty table points at; the second, run after it
in this file's order, finds every table empty but the content types and
permissions, which the flush keeps and post_migrate needs.
"""

from __future__ import annotations

import pytest
from django.apps import apps


def _rows_by_table() -> dict[str, int]:
    return {
        model._meta.db_table: model._default_manager.count()
        for model in apps.get_models(include_auto_created=True)
        if model._meta.managed and not model._meta.proxy
    }


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_writes_rows_in_several_tables() -> None:
    from django.contrib.auth.models import Group, Permission

    from queenadmin.domain import kv, queues

    queues.queue_push(items=[queues.PushItem("flushed", "p", "t1", "payload")])
    kv.kv_incr(namespace="flushed", key="n", delta=1, ttl=None)
    Group.objects.create(name="flushed").permissions.add(Permission.objects.first())
    written = {table for table, rows in _rows_by_table().items() if rows}
    assert {"queenadmin_message", "auth_group", "auth_group_permissions"} <= written


@pytest.mark.django_db(transaction=True)
def test_the_next_one_finds_only_content_types_and_permissions() -> None:
    left = {table for table, rows in _rows_by_table().items() if rows}
    assert left == {"django_content_type", "auth_permission"}
