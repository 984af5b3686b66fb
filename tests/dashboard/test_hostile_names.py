"""Names from before the name rule keep every dashboard page up.

A database may hold any text as a queue, partition, consumer group, KV
namespace or key, lock name, timer key or trace name (the rule that
refuses control characters came later). Each test stores such names as an
old database holds them: made through the domain under a plain name, then
renamed in place. Every page that lists them answers 200, shows them
escaped (no live ``<script>``, invisible characters written out), and each
name's own link leads to that name's page and nothing else, whatever the
name spells in a URL (``/``, ``..``, ``%2F``, ``?``, ``#``, ``/purge``).
"""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pytest
from django.urls import resolve, reverse

from queenadmin.dashboard import links
from queenadmin.domain import ephemeral, kv, locks, queues, timers
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import history
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.domain.queues.traces import trace_record
from queenadmin.models import (
    ConsumerCursor,
    ConsumerGroup,
    DeadLetter,
    EphemeralConfig,
    KVEntry,
    Message,
    Partition,
    Queue,
    Timer,
    TraceName,
)
from queenadmin.plumbing.db import json_text
from queenadmin.templatetags.dashboard import shown
from tests.conftest import IS_POSTGRES

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"

#: One of each kind of trouble a stored name brings to a page or a URL.
HOSTILE = [
    "a\nb",
    "a\tb",
    "a/b",
    "billing/purge",
    "..",
    "../x",
    "a%2Fb",
    "q?x#y",
    "x" * 513,
    "a\u200fb\u202ec",
    SCRIPT,
]
if not IS_POSTGRES:
    # PostgreSQL's text cannot hold NUL; SQLite's can.
    HOSTILE.append("a\x00b")


def hrefs(page: str) -> set[str]:
    return {html.unescape(found) for found in re.findall(r'href="([^"]*)"', page)}


def assert_survives_browsers(url: str) -> None:
    """A browser sends ``url`` as it is: no dot-segment to drop, no raw
    control character to strip."""
    for part in urlsplit(url).path.split("/"):
        assert part.lower() not in (".", "..", "%2e", "%2e%2e", ".%2e", "%2e."), url
    assert url.isprintable(), url
    assert " " not in url, url


def assert_page(response: Any) -> str:
    assert response.status_code == 200, (response.status_code, response.request["PATH_INFO"])
    page = response.content.decode()
    assert SCRIPT not in page
    return page


def renamed(model: Any, field: str, old: str, new: str) -> None:
    """Rename in place, as a database from before the rule holds it."""
    assert model.objects.filter(**{field: old}).update(**{field: new})


def test_names_spell_into_one_segment_and_back():
    """Every name, however hostile, is one path segment that reads back as
    itself; plain names read as themselves."""
    for name in [*HOSTILE, "", ".", "~", "~7E", "a~zz", "orders.new", "é"]:
        spelled = links.segment(name)
        assert "/" not in spelled
        assert_survives_browsers("/queues/" + spelled + "/")
        assert links.name_of(unquote(spelled)) == name
    assert links.segment("orders.new") == "orders.new"


def test_reverse_spells_every_name_into_the_page_of_that_name():
    """``reverse`` (and so ``{% url %}``) spells a name through its converter:
    every name, sub-delimiters (``&``, ``'``, ``;``) included, gives a URL a
    browser sends as it is and that resolves to that name's page."""
    for name in [*HOSTILE, "", ".", "~", "a&b=c+d;e:f@g!$'()*,", "//x", "a\\b"]:
        for url_name, kwargs in (
            ("dashboard:queue", {"name": name}),
            ("dashboard:queue_message", {"name": name, "message_id": name}),
            ("dashboard:kv_keys", {"namespace": name}),
            ("dashboard:kv_key", {"namespace": name, "key": name}),
        ):
            url = reverse(url_name, kwargs=kwargs)
            assert_survives_browsers(url)
            found = resolve(unquote(url))
            assert (found.view_name, found.kwargs) == (url_name, kwargs), (url_name, name)


@pytest.fixture
def stored_queues() -> dict[str, dict[str, str]]:
    """Per hostile name: a queue, its partition and its consumer group all
    named so, with a message leased to the group, one dead letter and a
    trace name; the message id of each."""
    made = {}
    for i, name in enumerate(HOSTILE):
        queue, partition, group = f"hq{i}", f"hp{i}", f"hg{i}"
        pushed = queues.queue_push(
            items=[queues.PushItem(queue, partition, json_text({"i": n}), trace_id=None) for n in range(3)]
        )
        dead = queues.queue_claim(
            request=queues.PopRequest(queue=queue, partition=partition, group=group, batch=1, lease_seconds=300)
        )
        queues.queue_ack(
            items=[
                queues.AckItem(0, m.transaction_id, str(m.partition_id), "dlq", dead.lease_id, "boom", dead.group)  # type: ignore[arg-type]
                for m in dead.messages
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
        made[name] = {"message_id": pushed[1].message_id}
    return made


def test_queue_pages_list_every_stored_name_and_link_it_to_its_own_page(client_for, operator, stored_queues):
    """/, /queues/, /dlq/ and /search/ list every hostile queue name (200,
    escaped) and link it to its own queue page; that page, its partition,
    its group's leases, its messages and its purge confirmation are about
    that queue and no other."""
    client = client_for(operator)
    lists = {
        "/": lambda name: links.queue_url(name),
        "/queues/": lambda name: links.queue_url(name),
        "/dlq/": lambda name: links.queue_url(name) + "#queue-dlq",
    }
    for path, link_of in lists.items():
        page = assert_page(client.get(path))
        found = hrefs(page)
        for name in HOSTILE:
            assert link_of(name) in found, (path, name)
    for name in HOSTILE:
        page = assert_page(client.get("/search/", {"q": name[:1]}))
        assert links.queue_url(name) in hrefs(page), name
    for name, made in stored_queues.items():
        url = links.queue_url(name)
        assert_survives_browsers(url)
        response = client.get(url)
        if "\x00" in name:
            # The domain reads no name holding NUL (``has_nul``): absent.
            assert response.status_code == 404
            continue
        page = assert_page(response)
        assert response.context["queue"].name == name
        found = hrefs(page)
        # Its partition, its group's leases, its purge, one of its messages.
        partition = f"?partition={quote(name, safe='')}#queue-messages"
        assert partition in found, name
        response = client.get(url + partition.split("#")[0])
        assert_page(response)
        assert response.context["partition"].name == name
        leases = links.queue_url(name, "leases") + f"?group={quote(name, safe='')}"
        assert leases in found, name
        response = client.get(leases)
        assert_page(response)
        assert response.context["queue_name"] == name
        assert [lease.group for lease in response.context["leases"]] == [name]
        purge = links.queue_url(name, "purge")
        assert purge in found, name
        response = client.get(purge)
        assert_page(response)
        assert response.context["queue_name"] == name
        message = links.message_url(name, made["message_id"])
        assert message in found, name
        response = client.get(message)
        assert_page(response)
        assert response.context["queue_name"] == name
        assert response.context["m"].message_id == made["message_id"]


def test_invisible_characters_are_written_out_and_isolated(client_for, operator, stored_queues):
    """A newline, a tab and bidi marks in a name show as escapes in a
    ``<bdi>``: two names that differ by them read differently, and a
    right-to-left override cannot turn the text around it."""
    queues.queue_push(items=[queues.PushItem("\u05d0\u05d1-rtl", "p", json_text({}))])
    page = assert_page(client_for(operator).get("/queues/"))
    assert '>a<span class="ctl" title="U+000A">\\n</span>b<' in page
    assert '>a<span class="ctl" title="U+0009">\\t</span>b<' in page
    assert '>a<span class="ctl" title="U+200F">\\u200f</span>b<span class="ctl" title="U+202E">\\u202e</span>c<' in page
    assert "\u202e" not in page
    assert "\u200f" not in page
    assert "<bdi>\u05d0\u05d1-rtl</bdi>" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_queue_named_like_a_sub_page_links_to_itself(client_for, operator):
    """``billing/purge`` and ``billing`` each have their page; the first is
    not the purge confirmation of the second, and ``../x`` stays under
    /queues/."""
    for name in ("billing", "billing/purge", "../x"):
        queues.queue_push(items=[queues.PushItem(name, "p", json_text({}))])
    client = client_for(operator)
    found = hrefs(assert_page(client.get("/queues/")))
    for name in ("billing", "billing/purge", "../x"):
        url = links.queue_url(name)
        assert url in found
        response = client.get(url)
        assert_page(response)
        assert response.resolver_match.url_name == "queue"
        assert response.context["queue"].name == name
    assert links.queue_url("../x").startswith("/queues/")
    assert_survives_browsers(links.queue_url("../x"))
    # Bookmarks of plain names keep working.
    assert client.get("/queues/billing/").context["queue"].name == "billing"


def test_kv_pages_list_every_stored_namespace_and_key(client_for, operator):
    """/kv/, / and /search/ list every hostile namespace and key; each
    namespace links to its page, which lists its key, which links to its
    page (the value shown)."""
    for i, name in enumerate(HOSTILE):
        kv.kv_put(namespace=f"hns{i}", key=f"k{i}", value={"n": i}, ttl=None)
        renamed(KVEntry, "namespace", f"hns{i}", name)
        renamed(KVEntry, "key", f"k{i}", name)
    history.stats_step()  # the overview lists the sampler's count
    client = client_for(operator)
    for path in ("/kv/", "/"):
        found = hrefs(assert_page(client.get(path)))
        for name in HOSTILE:
            assert links.kv_url(name) in found, (path, name)
    for i, name in enumerate(HOSTILE):
        url = links.kv_url(name)
        assert_survives_browsers(url)
        response = client.get(url)
        page = assert_page(response)
        assert response.context["namespace"] == name
        assert [row["key"] for row in response.context["rows"]] == [name]
        key_url = links.kv_key_url(name, name)
        assert key_url in hrefs(page)
        assert_survives_browsers(key_url)
        response = client.get(key_url)
        assert_page(response)
        assert (response.context["namespace"], response.context["key"]) == (name, name)
        assert response.context["row"]["value"] == {"n": i}
    for name in HOSTILE:
        page = assert_page(client.get("/search/", {"q": name[:1]}))
        assert links.kv_key_url(name, name) in hrefs(page), name


def test_locks_and_timers_pages_list_every_stored_name(client_for, operator):
    """/locks/ and /timers/ list every hostile lock name and timer key and
    queue; each lock's link shows that lock alone, each timer queue's link
    that queue's timers, each timer's cancel link that timer."""
    for i, name in enumerate(HOSTILE):
        locks.lock_acquire(name=f"hl{i}", ttl=60, owner="w1")
        renamed(KVEntry, "key", f"hl{i}#0", f"{name}#0")
        timers.timer_schedule(queue=f"ht{i}", timer_key=f"hk{i}", payload={"n": i}, delay=timedelta(minutes=5))
        renamed(Timer, "queue", f"ht{i}", name)
        renamed(Timer, "timer_key", f"hk{i}", name)
    client = client_for(operator)
    found = hrefs(assert_page(client.get("/locks/")))
    for name in HOSTILE:
        url = "/locks/?name=" + quote(name)
        assert url in found, name
        response = client.get(url)
        if "\x00" in name:
            assert response.status_code == 400
            continue
        assert_page(response)
        assert [p["name"] for p in response.context["permits"]] == [name]
    found = hrefs(assert_page(client.get("/timers/")))
    for name in HOSTILE:
        url = "/timers/?queue=" + quote(name)
        assert url in found, name
        response = client.get(url)
        if "\x00" in name or len(name.encode()) > 511:
            # A filter no timer queue may be named by today's rules.
            assert response.status_code == 400
        else:
            assert_page(response)
            assert [(t.queue, t.timer_key) for t in response.context["rows"]] == [(name, name)]
        cancel = [u for u in found if u.startswith("/timers/cancel/?") and f"queue={quote(name, safe='')}&" in u]
        assert len(cancel) == 1, name
        response = client.get(cancel[0])
        if "\x00" in name:
            assert response.status_code == 400
            continue
        assert_page(response)
        assert (response.context["row"].queue, response.context["row"].timer_key) == (name, name)


def test_trace_names_show_escaped(client_for, operator, stored_queues):
    """A message's trace names show hostile names escaped, on a page that
    answers 200."""
    name = HOSTILE[0]
    message = Message.objects.filter(partition__queue__name=name).order_by("offset").first()
    assert message is not None
    for i, _ in enumerate(HOSTILE):
        trace_record(
            partition_id=message.partition_id,
            transaction_id=message.transaction_id,
            group="g",
            event_type="step",
            data_json="{}",
            names=[f"tn{i}"],
        )
    for i, hostile in enumerate(HOSTILE):
        renamed(TraceName, "name", f"tn{i}", hostile)
    response = client_for(operator).get(links.message_url(name, message.message_id))
    page = assert_page(response)
    assert sorted(n for t in response.context["m"].traces for n in t.names) == sorted(HOSTILE)
    assert '<span class="ctl" title="U+000A">\\n</span>' in page


def test_the_ephemeral_page_lists_every_stored_name_escaped(client_for, operator):
    """/ephemeral/ lists declared ephemeral queues of every hostile name,
    each shown escaped."""
    for i, name in enumerate(HOSTILE):
        ephemeral.eph_configure(queue=f"he{i}", options={"maxLength": 2})
        renamed(EphemeralConfig, "queue", f"he{i}", name)
    response = client_for(operator).get("/ephemeral/")
    page = assert_page(response)
    assert sorted(q.queue for q in response.context["queues"]) == sorted(HOSTILE)
    for name in HOSTILE:
        assert f'<td class="key">{shown(name)}</td>' in page, name


def test_audit_targets_link_to_the_queue_they_name(client_for, operator, stored_queues):
    """A purge of a hostile queue is audited; /audit/ shows its target
    escaped and links it to that queue's page, ``/`` in its name or not."""
    who = Who("otto", "")
    for name in HOSTILE:
        if "\x00" not in name:
            queue_operator.queue_purge(queue=name, who=who, resume_at=None)
    page = assert_page(client_for(operator).get("/audit/"))
    found = hrefs(page)
    for name in HOSTILE:
        if "\x00" not in name:
            assert links.queue_url(name) in found, name


def test_a_notice_naming_a_hostile_queue_shows_it_escaped(client_for, operator):
    """The notice after a purge names the queue with its invisible
    characters written out: a right-to-left override cannot turn it."""
    name = "a\u202eb\nc"
    queues.queue_push(items=[queues.PushItem("placeholder", "p", json_text({}))])
    renamed(Queue, "name", "placeholder", name)
    client = client_for(operator, csrf=False)
    response = client.post(links.queue_url(name, "purge"), {"confirm": name}, follow=True)
    page = assert_page(response)
    assert "Purged 1 messages of a" in page
    assert "\u202e" not in page
    assert '<span class="ctl" title="U+202E">\\u202e</span>' in page
