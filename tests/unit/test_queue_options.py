"""The queue options' one declaration (``options.OPTIONS``): the kinds and
defaults the parser, the schema and the dashboard read from it, and a
queue's settings as its page shows them."""

from __future__ import annotations

import pytest

from queenadmin.api import errors as error_table
from queenadmin.domain import queues
from queenadmin.domain.queues.options import (
    BOOL_OPTIONS,
    INT_OPTIONS,
    OPTIONS,
    OptionSetting,
    option_settings,
    option_value,
)
from queenadmin.errors import QueueExists


def test_each_option_is_declared_once_with_a_default_its_own_rules_accept():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names)) == 20
    assert set(INT_OPTIONS) | set(BOOL_OPTIONS) == set(names)
    assert not set(INT_OPTIONS) & set(BOOL_OPTIONS)
    for o in OPTIONS:
        assert option_value(o.name, o.default) == o.default, o.name
        assert o.label
        assert o.meaning.endswith("."), o.name
        assert o.is_flag == (o.name in BOOL_OPTIONS)


def test_a_value_differs_from_its_default_by_value_and_by_kind():
    lease = next(o for o in OPTIONS if o.name == "leaseTime")
    dlq = next(o for o in OPTIONS if o.name == "deadLetterQueue")
    assert not OptionSetting(lease, 300).differs
    assert OptionSetting(lease, 30).differs
    assert not OptionSetting(dlq, True).differs
    # A flag stored as 1 (by hand, in an old row) is not its default True.
    assert OptionSetting(dlq, 1).differs


def test_option_settings_follow_the_declaration_and_fill_what_is_missing():
    settings = option_settings({"leaseTime": 30, "unknownOption": 5})
    assert [s.option.name for s in settings] == [o.name for o in OPTIONS]
    assert [s.option.name for s in settings if s.differs] == ["leaseTime"]


@pytest.mark.django_db
def test_queue_settings_reads_one_queue():
    assert queues.queue_settings(name="nope") is None
    assert queues.queue_settings(name="a\x00b") is None
    request = queues.ConfigureRequest("q", task="pdf", options=queues.QueueOptions((("retryLimit", 9),)))
    queues.queue_configure(request=request)
    settings = queues.queue_settings(name="q")
    assert settings is not None
    assert (settings.name, settings.namespace, settings.task, settings.changed) == ("q", None, "pdf", 1)


def test_a_queue_that_exists_would_answer_409_if_it_reached_the_api():
    status, body = error_table.render(QueueExists("queue q already exists"))
    assert (status, body) == (409, {"error": "queue q already exists", "code": "queue_exists"})
