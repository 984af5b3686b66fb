"""The live pages are the list in ``dashboard/pages.py``: every page a view
module declares is in it (so it has a socket), each name once."""

from __future__ import annotations

import importlib
import pkgutil

from queenadmin.dashboard import live, views
from queenadmin.dashboard.pages import PAGES
from queenadmin.dashboard.routing import websocket_urlpatterns


def _declared() -> dict[str, live.LivePage]:
    found = {}
    for info in pkgutil.iter_modules(views.__path__):
        module = importlib.import_module(f"{views.__name__}.{info.name}")
        found |= {value.name: value for value in vars(module).values() if isinstance(value, live.LivePage)}
    return found


def test_every_declared_live_page_is_listed():
    declared = _declared()
    assert len(declared) == 14
    assert PAGES.keys() == declared.keys()
    assert all(PAGES[name] is page for name, page in declared.items())


def test_every_listed_page_has_a_socket_route():
    (route,) = websocket_urlpatterns
    for name in PAGES:
        assert route.pattern.match(f"ws/{name}/"), name
    assert not route.pattern.match("ws/search/")
