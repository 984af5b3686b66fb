"""A lock's page shows its life (issue 41)."""

from __future__ import annotations

import pytest

from tests.unit.test_lock_history import OWNERS, _at, script_a_life

pytestmark = pytest.mark.django_db


def test_the_lock_page_shows_its_life_and_no_owner(client_for, viewer):
    """The lock's page charts its contention and lists its events, with
    fingerprints and labels; no owner string anywhere in it."""
    script_a_life()
    with _at(30):
        html = client_for(viewer).get("/locks/?name=jobs").content.decode()
    life = html[html.index('id="lock-life"') :]
    assert life.count("<svg") == 4
    table = life[life.index("data-lock-life") :]
    assert [row.split("<td>")[1].split("<")[0] for row in table.split("<tr>")[2:]] == [
        "guard refused",
        "renewed",
        "acquired",
        "forced",
        "acquired",
        "expired",
        "acquired",
        "released",
        "renewed",
        "acquired",
    ]
    for owner in OWNERS:
        assert owner not in html
