"""docs/routes.md is what ``manage.py routes_doc`` prints: committed, never stale."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from queenadmin.api.routes import ROUTES
from queenadmin.dashboard import urls
from queenadmin.management.commands import routes_doc
from tests.conftest import ROOT


def test_the_committed_route_table_is_what_the_code_prints():
    """Fails when a route, its scope or grant rule, its summary or a dashboard page changed
    and ``python manage.py routes_doc --write`` was not run."""
    call_command("routes_doc", "--check", stdout=io.StringIO())
    assert (ROOT / "docs" / "routes.md").read_text() == routes_doc.render()


def test_check_refuses_a_drifted_file(tmp_path):
    drifted = tmp_path / "routes.md"
    drifted.write_text(
        routes_doc.render().replace("| POST | `/api/v1/push` | write |", "| POST | `/api/v1/push` | read |")
    )
    with pytest.raises(CommandError, match=r"out of date(.|\n)*-\| POST \| `/api/v1/push` \| read"):
        call_command("routes_doc", "--check", "--path", str(drifted))
    call_command("routes_doc", "--write", "--path", str(drifted), stdout=io.StringIO())
    call_command("routes_doc", "--check", "--path", str(drifted), stdout=io.StringIO())


def test_every_route_and_page_has_a_row():
    text = routes_doc.render()
    for key, row in ROUTES.items():
        method, path = key.split(" ", 1)
        full = path if path.startswith("/streams/") else "/api/v1" + path
        assert f"| {method} | `{full}` | {row.scope} | {row.rule} |" in text, key
    for pattern in urls.urlpatterns:
        assert f"| `/{pattern.pattern}` | {pattern.name} |" in text, pattern
