"""KV entries in the admin: lists, filters, search, edit and delete as a CAS
through the domain (version, audit via admin, events), permissions, masking."""

from __future__ import annotations

import json
import re

import pytest

from queenadmin.domain import kv, locks
from queenadmin.domain.masking import mask_token
from queenadmin.models import AuditEntry, KVEntry
from tests.admin.conftest import action, groups_of
from tests.dashboard.conftest import advance_versions

pytestmark = pytest.mark.django_db

LIST = "/admin/queenadmin/kventry/"


def _change(entry: KVEntry) -> str:
    return f"{LIST}{entry.pk}/change/"


def _edit(entry: KVEntry, value: object, **extra: object) -> dict[str, object]:
    return {
        "value": json.dumps(value),
        "expiry": "keep",
        "ttl_seconds": "",
        "seen_version": str(entry.version),
        "reason": "fix the flag",
        "_save": "Save",
        **extra,
    }


@pytest.fixture
def flag() -> KVEntry:
    kv.kv_put(namespace="config", key="flag", value=1, ttl=None)
    kv.kv_put(namespace="config", key="other", value="x", ttl=60)
    kv.kv_put(namespace="cache", key="flag-cache", value=[1, 2], ttl=None)
    return KVEntry.objects.get(namespace="config", key="flag")


def test_list_search_and_filters(operator, flag):
    """The list shows keys; search by key and the namespace, expiry and
    version filters narrow it."""
    page = operator.get(LIST).content.decode()
    assert "flag-cache" in page
    assert "other" in page
    found = operator.get(LIST, {"q": "flag-"}).content.decode()
    assert "flag-cache" in found
    assert ">other<" not in found
    by_ns = operator.get(LIST, {"namespace": "cache"}).content.decode()
    assert "flag-cache" in by_ns
    assert ">other<" not in by_ns
    forever = operator.get(LIST, {"expiry": "never"}).content.decode()
    assert "flag-cache" in forever
    assert ">other<" not in forever
    expiring = operator.get(LIST, {"expiry": "hour"}).content.decode()
    assert ">other<" in expiring
    assert "flag-cache" not in expiring
    assert "flag-cache" not in operator.get(LIST, {"q": "cache"}).content.decode(), "a prefix, not a substring"
    kv.kv_put(namespace="config", key="fresh", value=0, ttl=None)
    recent = operator.get(LIST, {"written": "100"}).content.decode()
    assert "fresh" in recent


def test_edit_goes_through_the_domain(operator, flag, published, committing):
    """A save is a CAS write: the version moves, an audit entry via admin
    with the reason, and a kv event."""
    with committing():
        response = operator.post(_change(flag), _edit(flag, {"on": True}, expiry="ttl", ttl_seconds="600"))
    assert response.status_code == 302
    row = kv.kv_get(namespace="config", key="flag")
    assert row is not None
    assert row.value == {"on": True}
    assert row.version > flag.version
    assert row.expires_at is not None
    entry = AuditEntry.objects.get(action="kv.edit")
    assert (entry.actor, entry.via, entry.reason, entry.target) == ("otto", "admin", "fix the flag", "config/flag")
    assert {"kv", "audit"} <= groups_of(published)


def test_edit_of_a_moved_key_writes_nothing(operator, flag):
    """The version seen is the CAS: a write since wins and the page says so."""
    stale = _edit(flag, 5)
    kv.kv_put(namespace="config", key="flag", value=2, ttl=None)
    response = operator.post(_change(flag), stale, follow=True)
    assert "Not saved: the key moved" in response.content.decode()
    assert kv.kv_get(namespace="config", key="flag").value == 2  # type: ignore[union-attr]
    assert not AuditEntry.objects.exists()


def test_bad_json_is_a_form_error(operator, flag):
    response = operator.post(_change(flag), _edit(flag, 1) | {"value": "{nope"})
    assert response.status_code == 200
    assert "not JSON" in response.content.decode()
    assert kv.kv_get(namespace="config", key="flag").version == flag.version  # type: ignore[union-attr]


def test_delete_goes_through_the_domain(operator, flag, published, committing):
    with committing():
        response = operator.post(f"{LIST}{flag.pk}/delete/", {"post": "yes", "reason": "stale"})
    assert response.status_code == 302
    assert kv.kv_get(namespace="config", key="flag") is None
    entry = AuditEntry.objects.get(action="kv.delete")
    assert (entry.via, entry.reason) == ("admin", "stale")
    assert "kv" in groups_of(published)


def test_bulk_delete_asks_why_then_reports_how_many(operator, flag):
    ids = list(KVEntry.objects.filter(namespace="config").values_list("pk", flat=True))
    page = operator.post(LIST, {"action": "delete_selected_keys", "_selected_action": ids})
    assert page.status_code == 200
    assert "Reason" in page.content.decode()
    assert KVEntry.objects.filter(namespace="config").count() == 2
    done = operator.post(LIST, action("delete_selected_keys", ids, reason="cleanup"), follow=True)
    assert "Deleted 2 rows." in done.content.decode()
    assert not KVEntry.objects.filter(namespace="config").exists()
    assert AuditEntry.objects.filter(action="kv.delete", via="admin", reason="cleanup").count() == 2


def test_viewer_sees_but_may_not_change(viewer, flag):
    assert viewer.get(LIST).status_code == 200
    assert viewer.get(_change(flag)).status_code == 200
    assert viewer.post(_change(flag), _edit(flag, 9)).status_code == 403
    assert viewer.post(f"{LIST}{flag.pk}/delete/", {"post": "yes", "reason": "x"}).status_code == 403
    assert viewer.post(LIST, action("delete_selected_keys", [flag.pk], reason="x")).status_code == 403
    assert viewer.post(LIST, action("force_release", [flag.pk], reason="x")).status_code == 403
    assert kv.kv_get(namespace="config", key="flag").value == 1  # type: ignore[union-attr]
    assert not AuditEntry.objects.exists()


def test_lock_permits_show_masked_and_only_release(operator, published, committing):
    """A permit's owner and token never show raw; it is not editable or
    deletable as KV; force release goes through the locks' domain."""
    advance_versions()  # tokens past every id and count on a page
    got = locks.lock_acquire(name="jobs.sync", ttl=60, owner="worker-secret-owner")
    permit = KVEntry.objects.get(namespace=kv.LOCKS_NAMESPACE)
    token = str(got.token)
    for url in (LIST, f"{LIST}?namespace={kv.LOCKS_NAMESPACE}", _change(permit), f"{LIST}?q=jobs"):
        page = operator.get(url).content.decode()
        assert "worker-secret-owner" not in page
        # The row id is in links and checkboxes; on a store that draws ids
        # per write it can equal the token, which is then no leak of it.
        page = re.sub(rf'(value="|/){permit.pk}(["/])', r"\1ID\2", page)
        assert token not in page
    assert str(mask_token(got.token)) in operator.get(LIST, {"namespace": kv.LOCKS_NAMESPACE}).content.decode()
    assert operator.post(_change(permit), _edit(permit, {})).status_code == 403
    assert operator.post(f"{LIST}{permit.pk}/delete/", {"post": "yes", "reason": "x"}).status_code == 403
    with committing():
        done = operator.post(LIST, action("force_release", [permit.pk], reason="stuck worker"), follow=True)
    assert "Released 1 row." in done.content.decode()
    assert locks.lock_holders(name="jobs.sync").holders == ()
    entry = AuditEntry.objects.get(action="lock.release")
    assert entry.via == "admin"
    assert "worker-secret-owner" not in entry.before
    assert token not in entry.before
    assert "locks" in groups_of(published) or "kv" in groups_of(published)


def test_delete_aims_at_the_version_the_page_showed(operator, flag):
    page = operator.get(f"{LIST}{flag.pk}/delete/").content.decode()
    assert f'name="seen_version" value="{flag.version}"' in page
    kv.kv_put(namespace="config", key="flag", value=2, ttl=None)
    form = {"post": "yes", "reason": "stale", "seen_version": str(flag.version)}
    done = operator.post(f"{LIST}{flag.pk}/delete/", form, follow=True)
    assert "Not deleted: the key moved" in done.content.decode()
    assert "deleted successfully" not in done.content.decode()
    assert kv.kv_get(namespace="config", key="flag").value == 2  # type: ignore[union-attr]
    assert not AuditEntry.objects.exists()
