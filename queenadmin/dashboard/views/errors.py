"""403, 404 and 500 pages in the dashboard's frame (``handler403`` and the
others in ``queenadmin/urls.py``).

Paths that are not pages for people (``/api/``, ``/metrics``, ``/health``)
keep Django's default answers: the API answers its errors itself, in its
envelope, and what reaches these handlers from there is left as it was.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader
from django.views import defaults

from queenadmin.conf import settings as app_settings
from queenadmin.domain import clock


def for_machines(request: HttpRequest) -> bool:
    """A path whose errors are not drawn as dashboard pages."""
    path = request.path
    return path in ("/api", "/streams", "/metrics", "/health") or path.startswith(("/api/", "/streams/"))


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Why the page is refused, and the way out (log in, or log out)."""
    if for_machines(request):
        return defaults.permission_denied(request, exception)
    user = request.user
    staff = bool(user.is_authenticated and getattr(user, "is_staff", False))
    ctx = {
        "page": "error",
        "staff": staff,
        # The refusal's own words name the permission missing (dashboard
        # views raise them); only a staff account is shown them.
        "why": str(exception) if staff else "",
    }
    return render(request, "queenadmin/errors/403.html", ctx, status=403)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Nothing here: the path, what was missing, and where to go."""
    if for_machines(request):
        return defaults.page_not_found(request, exception)
    # The dashboard's own Http404s say what is missing ("no queue orders");
    # the resolver's carries a dict of the patterns tried, shown to nobody.
    message = exception.args[0] if isinstance(exception, Http404) and exception.args else ""
    ctx = {"page": "error", "what": message if isinstance(message, str) else "", "path": request.path}
    return render(request, "queenadmin/errors/404.html", ctx, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """A 500 drawn without the request's context: the database, the session
    or a context processor may be what failed."""
    if for_machines(request):
        return defaults.server_error(request)
    try:
        ctx = {"page": "error", "now": clock.now(), "environment": app_settings.ENVIRONMENT_NAME}
        return HttpResponseServerError(loader.get_template("queenadmin/errors/500.html").render(ctx))
    except Exception:
        # Whatever broke the page may break this one too: Django's plain 500.
        return defaults.server_error(request)
