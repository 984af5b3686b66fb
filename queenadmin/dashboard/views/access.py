"""Who may use a dashboard view, and who acts through it.

- ``page_view(live_page)``: the view of a live page whose path names
  nothing: ``staff_page`` around ``live.render_page``.
- ``staff_page(page)``: a GET page. Anonymous users go to the login page;
  a signed-in user who is not staff or lacks the page's view permission
  (``permissions.VIEW``) gets 403.
- ``staff_action(action)``: a POST-only action (CSRF checked by the
  middleware; never exempt). It needs staff and the action's change
  permission (``permissions.CHANGE``), else 403, anonymous included: an
  action is never a redirect to the login page. Its GET shows the
  confirmation (the same permission applies), so every action asks first,
  with or without JavaScript.
- ``reason_of(request)``: the optional reason an operator typed;
  ``who_of(request)``: the operator and that reason, as the domain's
  operator functions take them (``audit.Who``).
- ``can(user)``: which actions a user may do, for templates (a viewer sees
  no buttons; the server refuses anyway).

How a refused or conflicting action comes back (style.md section 6): a
lost compare-and-set or a timer that already fired is an ordinary outcome
and answers 200 with its explanation; bad input (an unreadable time) answers
422 with the form and its error, and ``base.html`` tells htmx to swap 422;
no permission answers 403, which htmx does not swap (``dashboard.js`` shows
a notice instead).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.middleware import HtmxDetails

from queenadmin.dashboard.live import LivePage, render_page
from queenadmin.dashboard.permissions import CHANGE, VIEW, User, can, may_do, may_view
from queenadmin.domain.audit import Who

__all__ = [
    "HtmxHttpRequest",
    "User",
    "actor_of",
    "can",
    "may_do",
    "may_view",
    "page_view",
    "reason_of",
    "staff_action",
    "staff_page",
    "who_of",
]

#: Longest reason kept (``Who.record_in_txn`` keeps 2,000 characters too).
MAX_REASON = 2000

View = TypeVar("View", bound=Callable[..., HttpResponse])


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (every one)."""

    htmx: HtmxDetails


def staff_page(page: str) -> Callable[[View], View]:
    """A GET page that needs staff and ``permissions.VIEW[page]``."""
    assert page in VIEW, page

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not may_view(request.user, page):
                raise PermissionDenied(f"viewing {page} needs {VIEW[page]}")
            return view(request, *args, **kwargs)

        return require_GET(wrapped)  # type: ignore[return-value]

    return decorate


def page_view(page: LivePage) -> Callable[[HtmxHttpRequest], HttpResponse]:
    """The GET view of ``page``: the page, or the region htmx targets."""

    def view(request: HtmxHttpRequest) -> HttpResponse:
        return render_page(request, page)

    view.__name__ = view.__qualname__ = page.name.replace("-", "_")
    return staff_page(page.permission)(view)


def staff_action(action: str) -> Callable[[View], View]:
    """An action: GET shows its confirmation, POST does it.

    Both need staff and ``permissions.CHANGE[action]``; anything else is 403.
    """
    assert action in CHANGE, action

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not may_do(request.user, action):
                raise PermissionDenied(f"{action} needs {CHANGE[action]}")
            return view(request, *args, **kwargs)

        return require_http_methods(["GET", "POST"])(wrapped)  # type: ignore[return-value]

    return decorate


def reason_of(request: HttpRequest) -> str:
    """The operator's reason from the POST body, trimmed (may be empty)."""
    return request.POST.get("reason", "").strip()[:MAX_REASON]


def actor_of(request: HttpRequest) -> str:
    """Who acts, as the audit trail names them."""
    return request.user.get_username()


def who_of(request: HttpRequest) -> Who:
    """Who acts through the dashboard, and the reason they typed."""
    return Who(actor_of(request), reason_of(request))
