"""Names stored before the name rule keep the Django admin up, and what
the admin offers to remove them removes them (issue 36, finding 2).

A database may hold any text as a queue, partition, consumer group, KV
namespace or key, lock name or timer key (the rule that refuses control
and bidi formatting characters came later). Each test stores such names as
an old database holds them: made through the domain under a plain name,
then renamed in place. As a superuser and as an operator, every changelist
and change page that shows them answers 200 with the name escaped, and the
admin's own delete, purge, release or cancel of each goes through the
domain and leaves no row behind.
"""

from __future__ import annotations

import html
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.dashboard.text import shown_text
from queenadmin.domain import kv, locks, queues, timers
from queenadmin.models import (
    ConsumerCursor,
    ConsumerGroup,
    DeadLetter,
    KVEntry,
    Message,
    Partition,
    Queue,
    Timer,
)
from queenadmin.plumbing.db import json_text
from tests.admin.conftest import action

pytestmark = pytest.mark.django_db

ADMIN = "/admin/queenadmin/"
SCRIPT = "<script>alert(1)</script>"

#: Names an old database may hold: a newline, a ``/`` and a newline, a
#: tab, a right-to-left override, markup.
LEGACY = ["orders.\nboom", "orders.a/\nb", "t\tab", "r\u202eevil", SCRIPT]


@pytest.fixture(params=["superuser", "operator"])
def staff(request: pytest.FixtureRequest) -> Client:
    """The admin as a superuser, then as an operator."""
    if request.param == "operator":
        client: Client = request.getfixturevalue("operator")
        return client
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def renamed(model: Any, field: str, old: str, new: str) -> None:
    """Rename in place, as a database from before the rule holds it."""
    assert model.objects.filter(**{field: old}).update(**{field: new})


def assert_shows(response: Any, *names: str) -> str:
    """200, each name escaped on the page, no live markup."""
    assert response.status_code == 200, (response.status_code, response.request["PATH_INFO"])
    page = response.content.decode()
    told = [str(m) for m in response.context["messages"]] if response.context and "messages" in response.context else []
    assert SCRIPT not in page
    for name in names:
        assert html.escape(name) in page, (name, response.request["PATH_INFO"], told)
    return page


def legacy_queue(i: int, name: str) -> Queue:
    """A queue, its partition and its consumer group all named ``name``:
    three messages, one dead-lettered by the group, one leased to it."""
    queue, partition, group = f"lq{i}", f"lp{i}", f"lg{i}"
    queues.queue_push(items=[queues.PushItem(queue, partition, json_text({"n": n})) for n in range(3)])
    claimed = queues.queue_claim(
        request=queues.PopRequest(queue=queue, partition=partition, group=group, batch=1, lease_seconds=300)
    )
    queues.queue_ack(
        items=[
            queues.AckItem(0, m.transaction_id, str(m.partition_id), "dlq", claimed.lease_id, "boom", claimed.group)  # type: ignore[arg-type]
            for m in claimed.messages
        ]
    )
    queues.queue_claim(
        request=queues.PopRequest(queue=queue, partition=partition, group=group, batch=1, lease_seconds=300)
    )
    renamed(Queue, "name", queue, name)
    renamed(Partition, "name", partition, name)
    renamed(ConsumerGroup, "name", group, name)
    renamed(ConsumerCursor, "group", group, name)
    renamed(DeadLetter, "group", group, name)
    return Queue.objects.get(name=name)


def test_legacy_queue_names_render_on_every_queue_page(staff):
    """Queues, partitions, consumer groups, messages and dead letters named
    before the rule: each changelist (plain and filtered by the queue) and
    each row's change page answers 200 with the name escaped."""
    made = [legacy_queue(i, name) for i, name in enumerate(LEGACY)]
    for model in ("queue", "partition", "consumergroup", "message", "deadletter"):
        assert_shows(staff.get(f"{ADMIN}{model}/"), *LEGACY if model != "message" else ())
    for queue in made:
        name = queue.name
        for model in ("partition", "consumergroup", "message", "deadletter"):
            listed = staff.get(f"{ADMIN}{model}/", {"queue": name})
            assert_shows(listed)
            assert listed.context["cl"].result_count >= 1, (model, name)
        assert_shows(staff.get(f"{ADMIN}queue/{queue.pk}/change/"), name)
        partition = Partition.objects.get(queue=queue)
        assert_shows(staff.get(f"{ADMIN}partition/{partition.pk}/change/"), name)
        group = ConsumerGroup.objects.get(queue=queue)
        assert_shows(staff.get(f"{ADMIN}consumergroup/{group.pk}/change/"), name)
        message = Message.objects.filter(partition=partition).first()
        assert message is not None
        # A message's page names its partition by id, not by name.
        assert_shows(staff.get(f"{ADMIN}message/{message.pk}/change/"))
        dead = DeadLetter.objects.get(queue=queue)
        assert_shows(staff.get(f"{ADMIN}deadletter/{dead.pk}/change/"), name)


def test_legacy_queues_are_purged_and_their_groups_deleted(staff):
    """The admin's purge of a queue's messages, purge of its DLQ and delete
    of its consumer group reach a queue and a group named before the rule:
    its messages, dead letters and group are gone, other queues' stay."""
    made = [legacy_queue(i, name) for i, name in enumerate(LEGACY)]
    kept = legacy_queue(99, "kept")
    for queue in made:
        name = queue.name
        done = staff.post(
            f"{ADMIN}queue/", action("purge_dlq", [queue.pk], reason="legacy", confirm_name=name), follow=True
        )
        assert_shows(done, f"Purged 1 dead letters of {name}.")
        assert not DeadLetter.objects.filter(queue=queue).exists(), name
        done = staff.post(
            f"{ADMIN}queue/", action("purge_queue", [queue.pk], reason="legacy", confirm_name=name), follow=True
        )
        assert_shows(done, f"Purged 3 messages of {name}.")
        assert not Message.objects.filter(partition__queue=queue).exists(), name
        group = ConsumerGroup.objects.get(queue=queue)
        done = staff.post(
            f"{ADMIN}consumergroup/",
            action("delete_group", [group.pk], reason="legacy", confirm_name=name),
            follow=True,
        )
        assert_shows(done, f"Deleted the group {name} on {name}.")
        assert not ConsumerGroup.objects.filter(queue=queue).exists(), name
        assert not ConsumerCursor.objects.filter(partition__queue=queue).exists(), name
    assert Message.objects.filter(partition__queue=kept).count() == 3
    assert DeadLetter.objects.filter(queue=kept).count() == 1
    assert ConsumerGroup.objects.filter(queue=kept).count() == 1


def test_a_name_a_browser_cannot_type_is_confirmed_as_the_page_spells_it(staff):
    """A text field drops line breaks, so a purge or group delete of a name
    holding one is confirmed by typing the name as the confirmation page
    spells it (``orders.\\nboom``): the page shows that spelling, and it
    purges the messages and the DLQ and deletes the group."""
    made = [legacy_queue(i, name) for i, name in enumerate(LEGACY)]
    for queue in made:
        name, typed = queue.name, shown_text(queue.name)
        assert "\n" not in typed
        assert "\r" not in typed
        for verb in ("purge_dlq", "purge_queue"):
            asked = staff.post(f"{ADMIN}queue/", {"action": verb, "_selected_action": [str(queue.pk)]})
            assert_shows(asked, typed)
            staff.post(f"{ADMIN}queue/", action(verb, [queue.pk], reason="legacy", confirm_name=typed))
        assert not DeadLetter.objects.filter(queue=queue).exists(), name
        assert not Message.objects.filter(partition__queue=queue).exists(), name
        group = ConsumerGroup.objects.get(queue=queue)
        asked = staff.post(f"{ADMIN}consumergroup/", {"action": "delete_group", "_selected_action": [str(group.pk)]})
        assert_shows(asked, typed)
        staff.post(f"{ADMIN}consumergroup/", action("delete_group", [group.pk], reason="legacy", confirm_name=typed))
        assert not ConsumerGroup.objects.filter(queue=queue).exists(), name


def test_legacy_dead_letters_are_replayed_and_purged_by_selection(staff):
    """Dead letters of a queue and group named before the rule are replayed
    and purged from the dead letters' list."""
    made = [legacy_queue(i, name) for i, name in enumerate(LEGACY)]
    first = DeadLetter.objects.get(queue=made[0])
    done = staff.post(f"{ADMIN}deadletter/", action("replay", [first.pk], reason="legacy"), follow=True)
    assert_shows(done, "Replayed 1 dead letters")
    assert not DeadLetter.objects.filter(pk=first.pk).exists()
    for queue in made[1:]:
        dead = DeadLetter.objects.get(queue=queue)
        done = staff.post(
            f"{ADMIN}deadletter/", action("purge", [dead.pk], reason="legacy", confirm_name=queue.name), follow=True
        )
        assert_shows(done, "Purged 1 dead letters.")
    assert not DeadLetter.objects.exists()


def legacy_kv() -> list[KVEntry]:
    """Per legacy name: a key in a plain namespace, a plain key in a
    namespace so named, and a key and namespace both so named."""
    for i, name in enumerate(LEGACY):
        kv.kv_put(namespace="plain", key=f"k{i}", value={"n": i}, ttl=None)
        renamed(KVEntry, "key", f"k{i}", name)
        kv.kv_put(namespace=f"ns{i}", key="plain", value={"n": i}, ttl=None)
        renamed(KVEntry, "namespace", f"ns{i}", name)
        kv.kv_put(namespace=f"both{i}", key=f"b{i}", value={"n": i}, ttl=60)
        renamed(KVEntry, "namespace", f"both{i}", name + ".b")
        renamed(KVEntry, "key", f"b{i}", name)
    return list(KVEntry.objects.order_by("pk"))


def test_legacy_kv_names_render_and_are_deleted(staff):
    """KV keys and namespaces named before the rule: the list (plain,
    filtered by namespace, searched by key) and each change and delete page
    answer 200 with the name escaped; half are deleted through the delete
    page, the rest through the bulk delete; no row is left."""
    entries = legacy_kv()
    assert_shows(staff.get(f"{ADMIN}kventry/"), *LEGACY)
    for entry in entries:
        assert_shows(staff.get(f"{ADMIN}kventry/", {"namespace": entry.namespace}), entry.namespace, entry.key)
        assert_shows(staff.get(f"{ADMIN}kventry/{entry.pk}/change/"), entry.namespace, entry.key)
        assert_shows(staff.get(f"{ADMIN}kventry/{entry.pk}/delete/"))
    by_page, by_action = entries[::2], entries[1::2]
    for entry in by_page:
        form = {"post": "yes", "reason": "legacy", "seen_version": str(entry.version)}
        done = staff.post(f"{ADMIN}kventry/{entry.pk}/delete/", form, follow=True)
        assert_shows(done, "deleted successfully")
        assert not KVEntry.objects.filter(pk=entry.pk).exists(), (entry.namespace, entry.key)
    done = staff.post(
        f"{ADMIN}kventry/", action("delete_selected_keys", [e.pk for e in by_action], reason="legacy"), follow=True
    )
    assert_shows(done, f"Deleted {len(by_action)} rows.")
    assert not KVEntry.objects.exists()


def test_legacy_lock_permits_render_and_are_released(staff):
    """Lock permits whose lock is named before the rule show in the KV list
    and on their page (200, escaped) and are force released."""
    for i, name in enumerate(LEGACY):
        locks.lock_acquire(name=f"ll{i}", ttl=60, owner="w1")
        renamed(KVEntry, "key", f"ll{i}#0", f"{name}#0")
    permits = list(KVEntry.objects.filter(namespace=kv.LOCKS_NAMESPACE))
    assert len(permits) == len(LEGACY)
    assert_shows(staff.get(f"{ADMIN}kventry/", {"namespace": kv.LOCKS_NAMESPACE}), *LEGACY)
    for permit in permits:
        assert_shows(staff.get(f"{ADMIN}kventry/{permit.pk}/change/"), permit.key)
    done = staff.post(
        f"{ADMIN}kventry/", action("force_release", [p.pk for p in permits], reason="legacy"), follow=True
    )
    assert_shows(done, f"Released {len(LEGACY)} rows.")
    assert not KVEntry.objects.filter(namespace=kv.LOCKS_NAMESPACE).exists()


def legacy_timers() -> list[Timer]:
    for i, name in enumerate(LEGACY):
        timers.timer_schedule(queue=f"tq{i}", timer_key=f"tk{i}", payload={"n": i}, delay=timedelta(minutes=5))
        renamed(Timer, "queue", f"tq{i}", name)
        renamed(Timer, "timer_key", f"tk{i}", name)
    return list(Timer.objects.order_by("pk"))


def test_legacy_timers_render_and_are_cancelled(staff):
    """Timers whose queue and key are named before the rule: the list
    (plain and filtered by queue) and each change and delete page answer
    200 with the names escaped; half are cancelled through the delete page,
    the rest through the cancel action; no timer is left."""
    scheduled = legacy_timers()
    assert_shows(staff.get(f"{ADMIN}timer/"), *LEGACY)
    for timer in scheduled:
        assert_shows(staff.get(f"{ADMIN}timer/", {"queue": timer.queue}), timer.timer_key)
        assert_shows(staff.get(f"{ADMIN}timer/{timer.pk}/change/"), timer.queue, timer.timer_key)
        assert_shows(staff.get(f"{ADMIN}timer/{timer.pk}/delete/"))
    by_page, by_action = scheduled[::2], scheduled[1::2]
    for timer in by_page:
        form = {"post": "yes", "reason": "legacy", "seen_message_id": timer.message_id}
        done = staff.post(f"{ADMIN}timer/{timer.pk}/delete/", form, follow=True)
        assert_shows(done, "deleted successfully")
        assert not Timer.objects.filter(pk=timer.pk).exists(), (timer.queue, timer.timer_key)
    done = staff.post(
        f"{ADMIN}timer/", action("cancel_timers", [t.pk for t in by_action], reason="legacy"), follow=True
    )
    assert_shows(done, f"Cancelled {len(by_action)} rows.")
    assert not Timer.objects.exists()
