"""Issue 36, finding 6 on the dashboard: NUL in a page's path, query string
or form fields answers the dashboard's 400 page, on both databases."""

from __future__ import annotations

import pytest

#: The dashboard filters that answered 500 on PostgreSQL with NUL in them.
NUL_FILTERS = [
    "/kv/config/?prefix=a%00",
    "/kv/config/?after=a%00",
    "/kv/config/key/a%00b",
    "/locks/?prefix=%00",
    "/locks/?name=%00",
    "/search/?q=%00",
    "/audit/?target=%00",
    "/audit/?actor=%00",
    "/timers/cancel/?queue=%00&key=%00",
]


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
def test_nul_in_any_filter_answers_a_400_page(client_for, operator, method):
    """NUL in a dashboard page's path or fields answers the dashboard's 400
    page: nothing is looked up, on either database."""
    client = client_for(operator)
    for path in NUL_FILTERS:
        if method == "post":
            path, _, fields = path.partition("?")
            response = client.post(path, fields or "x=1", content_type="application/x-www-form-urlencoded")
        else:
            response = client.get(path)
        assert response.status_code == 400, path
        page = response.content.decode()
        assert "400 · bad request" in page, path
        assert "\x00" not in page
