from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from queenadmin.dashboard.views import home, locks

app_name = "dashboard"

urlpatterns = [
    path("", home.home, name="home"),
    path("login/", auth_views.LoginView.as_view(template_name="queenadmin/login.html"), name="login"),
    path("locks/", locks.locks, name="locks"),
    path("locks/release/", locks.lock_release, name="lock_release"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]
