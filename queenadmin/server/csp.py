"""The Content-Security-Policy of every browser page (django-csp 4).

Self only: no inline script or style anywhere, no ``eval``, nothing from
another host, no framing. The dashboard, the admin, the login and the error
pages all run under it (``tests/browser`` counts violations on every page
it visits: none is allowed). What makes that hold:

- htmx is told not to inject its indicator ``<style>`` (``base.html``'s
  ``htmx-config``: ``includeIndicatorStyles``; the rules are in
  ``queenadmin.css``) and not to evaluate anything (``allowEval``,
  ``allowScriptTags``); templates carry no ``style=``, ``on…=`` or
  ``hx-on`` attributes and no inline ``<script>``.
- Django 5.2's admin has no inline script or style either: its page data
  travels in ``data-`` attributes read by its static scripts.
- ``connect-src 'self'`` covers the dashboard's websocket: CSP Level 3 lets
  ``'self'`` match ``ws:``/``wss:`` of the page's own host and port
  (``wss:`` on an ``https:`` page), which Chromium follows.

The API (``/api/v1``, ``/health``, ``/metrics``) answers JSON or text and
gets no policy: its chain leaves the middleware out
(``server.handlers.BROWSER_ONLY_MIDDLEWARE``), and ``CSPMiddleware`` skips
those paths in Django's whole chain too, so both chains answer alike. That
leaves ninja's Swagger page (``/api/v1/docs``) without one.

``QUEENADMIN_CSP_REPORT_ONLY=1`` sends the same policy as
``Content-Security-Policy-Report-Only``: browsers then log what the policy
would block and block nothing (to try the policy against a deployment's
own proxy or extensions first).
"""

from __future__ import annotations

from typing import Any

from csp.constants import NONE, SELF
from csp.middleware import CSPMiddleware as _CSPMiddleware
from django.http import HttpRequest
from django.http.response import HttpResponseBase

#: The policy's directives, in django-csp's ``DIRECTIVES`` form.
DIRECTIVES: dict[str, list[str]] = {
    "default-src": [SELF],
    "script-src": [SELF],
    "style-src": [SELF],
    "img-src": [SELF],
    "connect-src": [SELF],
    "object-src": [NONE],
    "base-uri": [NONE],
    "form-action": [SELF],
    "frame-ancestors": [NONE],
}


def csp_settings(*, report_only: bool) -> dict[str, Any]:
    """Django-csp's two settings: the policy enforced, or only reported."""
    policy = {"DIRECTIVES": DIRECTIVES}
    return {
        "CONTENT_SECURITY_POLICY": None if report_only else policy,
        "CONTENT_SECURITY_POLICY_REPORT_ONLY": policy if report_only else None,
    }


class CSPMiddleware(_CSPMiddleware):
    """Django-csp's middleware, which leaves the API's answers alone."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        # Imported here: settings.py imports this module, before the
        # handlers could be.
        from queenadmin.server.handlers import is_api_path

        if is_api_path(request.path_info):
            return response
        return super().process_response(request, response)
