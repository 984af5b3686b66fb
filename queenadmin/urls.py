from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from queenadmin.api import api, streams_api
from queenadmin.api.errors import NO_ROUTE
from queenadmin.api.http import json_response
from queenadmin.api.metrics import metrics_view


def health(request: HttpRequest) -> HttpResponse:
    return json_response({"status": "ok"})


@csrf_exempt
def no_such_route(request: HttpRequest) -> HttpResponse:
    return json_response(NO_ROUTE.render(request), 404)


urlpatterns = [
    path("health", health, name="health"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", api.urls),
    # [\s\S], not ".": a path with a newline is an unknown route too.
    re_path(r"^api(?:/[\s\S]*)?$", no_such_route, name="no_such_route"),
    path("admin/", admin.site.urls),
    path("", include("queenadmin.dashboard.urls")),
    # After the dashboard: mounted at the root (its routes spell their full
    # paths), the streams API's own root view (ninja's "api-root", which its
    # OpenAPI document needs) would otherwise answer "/".
    path("", streams_api.urls),
    re_path(r"^streams(?:/[\s\S]*)?$", no_such_route, name="no_such_streams_route"),
]

handler403 = "queenadmin.dashboard.views.errors.forbidden"
handler404 = "queenadmin.dashboard.views.errors.not_found"
handler500 = "queenadmin.dashboard.views.errors.server_error"
