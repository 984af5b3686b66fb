from __future__ import annotations

from django.urls import path

from queenadmin.dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
]
