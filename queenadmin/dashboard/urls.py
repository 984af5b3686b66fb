from __future__ import annotations

from django.urls import path

from queenadmin.dashboard.views import home

app_name = "dashboard"

urlpatterns = [
    path("", home.home, name="home"),
]
