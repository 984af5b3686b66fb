"""Who may use a dashboard view, and who acts through it.

``staff_page`` (a GET page: staff with the page's view permission, else the
login page or 403), ``page_view`` (that around ``live.render_page``),
``staff_action`` (POST with CSRF, the action's change permission, else 403
even when anonymous; its GET is the confirmation), ``who_of`` /
``reason_of`` (the operator and their reason, for the audit). A lost
compare-and-set or a timer that already fired answers 200 with its
explanation, bad input 422 with the form, no permission 403 (style.md
section 6).
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
