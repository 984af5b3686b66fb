"""A key's page shows its history: versions, a diff, the value at a time,
and "revert to this version" as an audited compare-and-set."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain import kv
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def _four_versions() -> list[int]:
    """put, put, delete, put of config/limits, a second apart; their history versions."""
    with time_machine.travel(T0, tick=False):
        kv.kv_put(namespace="config", key="limits", value={"rps": 100, "burst": 5}, ttl=None)
    with time_machine.travel(T0 + timedelta(seconds=1), tick=False):
        kv.kv_put(namespace="config", key="limits", value={"rps": 200, "burst": 5}, ttl=None)
    with time_machine.travel(T0 + timedelta(seconds=2), tick=False):
        kv.kv_delete(namespace="config", key="limits")
    with time_machine.travel(T0 + timedelta(seconds=3), tick=False):
        kv.kv_put(namespace="config", key="limits", value={"rps": 300, "burst": 5}, ttl=None)
    return [v.version for v in kv.kv_history(namespace="config", key="limits").versions]


def test_the_key_page_lists_its_versions_newest_first(client_for, viewer):
    versions = _four_versions()
    html = client_for(viewer).get("/kv/config/key/limits").content.decode()
    table = html[html.index("data-history") :]
    positions = [table.index(f'<td class="mono">{v}</td>') for v in versions]
    assert positions == sorted(positions)
    assert "<i>deleted</i>" in table
    assert "Revert to this" not in html, "a viewer may not revert"


def test_a_diff_between_two_versions(client_for, viewer):
    versions = _four_versions()
    html = client_for(viewer).get(f"/kv/config/key/limits?a={versions[3]}&b={versions[2]}").content.decode()
    diff = html[html.index("data-diff") :]
    assert '<span class="diff-del">-  &quot;rps&quot;: 100,</span>' in diff
    assert '<span class="diff-add">+  &quot;rps&quot;: 200,</span>' in diff
    assert 'diff-del">-  &quot;burst' not in diff


def test_the_value_at_a_chosen_time(client_for, viewer):
    versions = _four_versions()
    client = client_for(viewer)
    html = client.get("/kv/config/key/limits?at=2026-10-08T10:00:01.500").content.decode()
    assert f'version <b class="mono">{versions[2]}</b>' in html
    assert "&quot;rps&quot;: 200" in html[html.index("data-at-value") :]
    gone = client.get("/kv/config/key/limits?at=2026-10-08T10:00:02.500").content.decode()
    assert "the key was deleted" in gone
    before = client.get("/kv/config/key/limits?at=2026-10-08T09:00").content.decode()
    assert "No version kept at or before that time" in before
    bad = client.get("/kv/config/key/limits?at=yesterday").content.decode()
    assert "Give a time as" in bad


def test_revert_is_a_compare_and_set_and_audited(client_for, operator):
    versions = _four_versions()
    current = kv.kv_get(namespace="config", key="limits")
    client = client_for(operator)
    page = client.get("/kv/config/key/limits").content.decode()
    assert f"version={versions[3]}&amp;expect={current.version}" in page
    form = {"key": "limits", "version": versions[3], "expect": current.version, "reason": "undo"}
    asked = client.get("/kv/config/revert/", form).content.decode()
    assert "&quot;rps&quot;: 100" in asked
    response = client.post("/kv/config/revert/", form)
    assert response.status_code == 302
    row = kv.kv_get(namespace="config", key="limits")
    assert row.value == {"rps": 100, "burst": 5}
    assert row.version > current.version
    entry = AuditEntry.objects.get(action="kv.revert")
    assert (entry.actor, entry.reason, entry.target) == ("otto", "undo", "config/limits")
    assert json.loads(entry.before)["value"] == {"rps": 300, "burst": 5}
    assert json.loads(entry.after)["value"] == {"rps": 100, "burst": 5}
    newest = kv.kv_history(namespace="config", key="limits").versions[0]
    assert (newest.version, newest.op, newest.by) == (row.version, "put", "otto")


def test_a_revert_refused_because_the_key_moved_shows_both_values(client_for, operator):
    versions = _four_versions()
    seen = kv.kv_get(namespace="config", key="limits")
    kv.kv_put(namespace="config", key="limits", value={"rps": 999}, ttl=None)
    response = client_for(operator).post(
        "/kv/config/revert/",
        {"key": "limits", "version": versions[3], "expect": seen.version},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert "the key moved" in html
    assert "&quot;rps&quot;: 999" in html[html.index("data-current-value") :]
    assert "&quot;rps&quot;: 100" in html[html.index("data-target-value") :]
    assert kv.kv_get(namespace="config", key="limits").value == {"rps": 999}
    assert not AuditEntry.objects.filter(action="kv.revert").exists()


def test_revert_to_a_delete_deletes_while_at_the_version_shown(client_for, operator):
    versions = _four_versions()
    current = kv.kv_get(namespace="config", key="limits")
    response = client_for(operator).post(
        "/kv/config/revert/", {"key": "limits", "version": versions[1], "expect": current.version}
    )
    assert response.status_code == 302
    assert kv.kv_get(namespace="config", key="limits") is None
    assert AuditEntry.objects.filter(action="kv.revert").count() == 1


@pytest.mark.parametrize(
    ("form", "status"),
    [
        ({"key": "limits", "version": "x", "expect": "1"}, 404),
        ({"key": "limits", "version": "99999999", "expect": "1"}, 404),
    ],
)
def test_a_revert_of_an_unknown_version_is_404(client_for, operator, form, status):
    _four_versions()
    assert client_for(operator).post("/kv/config/revert/", form).status_code == status


def test_a_revert_without_the_version_on_screen_is_422(client_for, operator):
    versions = _four_versions()
    response = client_for(operator).post("/kv/config/revert/", {"key": "limits", "version": versions[3]})
    assert response.status_code == 422


@pytest.mark.parametrize("who", ["anonymous", "outsider", "viewer"])
def test_revert_needs_the_change_permission(client_for, request, who):
    versions = _four_versions()
    user = None if who == "anonymous" else request.getfixturevalue(who)
    form = {"key": "limits", "version": versions[3], "expect": kv.kv_get(namespace="config", key="limits").version}
    assert client_for(user).post("/kv/config/revert/", form).status_code == 403
    assert kv.kv_get(namespace="config", key="limits").value == {"rps": 300, "burst": 5}


def test_history_pages_continue_with_older_versions(client_for, viewer):
    for i in range(55):
        kv.kv_put(namespace="config", key="many", value=f"value {i}", ttl=None)
    html = client_for(viewer).get("/kv/config/key/many").content.decode()
    assert "Older versions" in html
    oldest = kv.kv_history(namespace="config", key="many", limit=1000).versions[-1].version
    assert f'<td class="mono">{oldest}</td>' not in html
    nxt = html[html.index("?before=") + len("?before=") :].split('"')[0]
    older = client_for(viewer).get(f"/kv/config/key/many?before={nxt}").content.decode()
    assert f'<td class="mono">{oldest}</td>' in older
