"""The admin site: Django's, with the second factor at its login.

Outside the ``admin`` package on purpose: Django imports this class when
``admin.site`` is first used, which is while that package's modules
register their model admins; from inside it, the import would run them a
second time, against a site that is then thrown away.

``AdminLoginForm`` asks for the code on the same form as the password
(``admin/queenadmin/login.html``) from accounts that have a second factor
or must have one (``dashboard/twofactor.py``); an account that must and has
none is sent to the dashboard's login to set it up. A wrong code counts as a
failed login for django-axes, as on the dashboard. ``has_permission``
refuses a session that lacks the second factor its user needs.

With single sign-on configured the login page also offers "Sign in with
<provider>" (the dashboard's ``/login/sso/``, back to the admin); with
``LOCAL_LOGIN=0`` it offers only that, and the form refuses a password
before checking it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin import AdminSite
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse

from queenadmin.dashboard import twofactor
from queenadmin.domain.identity.sso import local_login_allowed, sso_offered
from queenadmin.domain.twofactor import twofactor_verify


class AdminLoginForm(AdminAuthenticationForm):
    code = forms.CharField(
        label="Code",
        required=False,
        max_length=64,
        strip=True,
        help_text="From your authenticator app, or a recovery code (accounts with two-factor login).",
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "spellcheck": "false"}),
    )

    def clean(self) -> dict[str, Any]:
        if not local_login_allowed():
            config = sso_offered()
            name = config.provider_name if config is not None else "single sign-on"
            raise forms.ValidationError(f"Password login is off here: sign in with {name}.", code="local_login_off")
        cleaned = super().clean()
        user: Any = self.get_user()
        if user is None:
            return cleaned
        if twofactor.asks_code(user):
            code = cleaned.get("code") or ""
            verified = twofactor_verify(user=user, code=code, via="admin") if code else None
            if verified is None:
                if code:
                    # A wrong code is a failed login: axes counts it.
                    user_login_failed.send(
                        sender=__name__, credentials={"username": user.get_username()}, request=self.request
                    )
                raise forms.ValidationError(
                    "This account logs in with two factors: enter the current code from its "
                    "authenticator app, or a recovery code.",
                    code="second_factor",
                )
            # django_otp marks the session verified when Django logs it in.
            user.otp_device = verified.device
        elif twofactor.required(user):
            raise forms.ValidationError(
                "This account must log in with two factors and has none yet: log in on the "
                "dashboard (/login/) to set them up.",
                code="second_factor_missing",
            )
        return cleaned


class QueenAdminSite(AdminSite):
    login_form = AdminLoginForm
    login_template = "admin/queenadmin/login.html"
    site_header = "queenadmin admin"
    site_title = "queenadmin admin"
    index_title = "Manual fixes, through the same rules as the dashboard"
    #: The index lists every model; a sidebar repeating it on every page
    #: would leave a list 290 px less of a 1440 px screen.
    enable_nav_sidebar = False

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        config = sso_offered()
        context = {
            "sso_name": config.provider_name if config is not None else "",
            "local_login": local_login_allowed(),
            **(extra_context or {}),
        }
        return super().login(request, extra_context=context)

    def has_permission(self, request: HttpRequest) -> bool:
        return super().has_permission(request) and not twofactor.unverified(request)
