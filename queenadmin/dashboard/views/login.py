"""``/login/``, ``/login/code/``, ``/account/two-factor/`` and ``/logout/``.

The password step is Django's ``LoginView`` (django-axes counts and refuses
failures in its authentication backend, before any password is checked).
An account with a second factor, or one that must have one
(``dashboard/twofactor.py``), is not logged in by its password: the code
step logs it in once the authenticator's code or a recovery code matches,
and a wrong code counts as a failed login towards the same lockout.

``/account/two-factor/`` sets up an authenticator: the QR code and the
secret, confirmed by a code before it is used; the recovery codes are shown
in that answer only. A logged-in user may do it at any time (if it has one
already, from a session that proved it); an account that must have one and
has none does it in the middle of its login, which completes when the
authenticator is confirmed.

With single sign-on configured the login page offers "Sign in with
<provider>" (``dashboard/sso.py``); with ``LOCAL_LOGIN=0`` it offers only
that, and a password sent anyway is refused (403) before it is checked.
The logout of a session signed in through the provider goes on to the
provider's own logout when it has one (a page that forwards the browser:
the pages' ``form-action 'self'`` would stop a redirect answering the form).
"""

from __future__ import annotations

from typing import Any

import segno
from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.contrib.auth import login as auth_login
from django.contrib.auth import views as auth_views
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods
from django_otp import login as otp_login

from queenadmin.dashboard import lockout, twofactor
from queenadmin.dashboard.permissions import User
from queenadmin.domain.audit import Who
from queenadmin.domain.identity.sso import local_login_allowed, sso_offered
from queenadmin.domain.twofactor import (
    twofactor_enrol_begin,
    twofactor_enrol_confirm,
    twofactor_enrolment,
    twofactor_verify,
)


class CodeForm(forms.Form):
    code = forms.CharField(
        max_length=64,
        strip=True,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autofocus": True, "spellcheck": "false"}),
    )


class LoginView(auth_views.LoginView):
    """The password step."""

    template_name = "queenadmin/login.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        config = sso_offered()
        context["sso_name"] = config.provider_name if config is not None else ""
        context["local_login"] = local_login_allowed()
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not local_login_allowed():
            # Refused before any password is checked (or counted).
            context = self.get_context_data(form=self.get_form_class()(request))
            context["local_login_off"] = True
            return self.render_to_response(context, status=403)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        user = form.get_user()
        if twofactor.asks_code(user):
            twofactor.begin_pending(self.request, user, self.get_success_url())
            return redirect("dashboard:login_code")
        if twofactor.required(user):
            twofactor.begin_pending(self.request, user, self.get_success_url())
            return redirect("dashboard:two_factor")
        twofactor.end_pending(self.request)
        return super().form_valid(form)


def _complete(request: HttpRequest, user: User, device: Any) -> None:
    """Log ``user`` in, its session verified by ``device``."""
    twofactor.end_pending(request)
    auth_login(request, user, backend=user.backend)
    otp_login(request, device)


@sensitive_post_parameters("code")
@csrf_protect
@never_cache
@require_http_methods(["GET", "POST"])
def login_code(request: HttpRequest) -> HttpResponseBase:
    """The second step: the authenticator's code or a recovery code."""
    waiting = twofactor.pending(request)
    if waiting is None:
        return redirect("dashboard:login")
    user, data = waiting
    credentials = {"username": user.get_username()}
    if not AxesProxyHandler.is_allowed(request, credentials):
        twofactor.end_pending(request)
        return lockout.lockout_response(request, None, credentials)
    form = CodeForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        verified = twofactor_verify(user=user, code=form.cleaned_data["code"], via="dashboard")
        if verified is not None:
            _complete(request, user, verified.device)
            return redirect(data["next"])
        # A wrong code is a failed login: axes counts it, and may lock out.
        user_login_failed.send(sender=__name__, credentials=credentials, request=request)
        if getattr(request, "axes_locked_out", False):
            twofactor.end_pending(request)
        form.add_error("code", "That code does not match. Enter the current code, or a recovery code.")
    return render(request, "queenadmin/login_code.html", {"form": form, "username": user.get_username()})


def _qr_svg(uri: str) -> str:
    # segno writes the SVG itself, from the URI only: nothing to escape.
    return str(segno.make(uri, error="m").svg_inline(scale=4, dark="#111", light="#fff"))


@sensitive_post_parameters("code")
@csrf_protect
@never_cache
@require_http_methods(["GET", "POST"])
def two_factor(request: HttpRequest) -> HttpResponseBase:
    """Set up an authenticator (see the module)."""
    waiting = None
    if request.user.is_authenticated:
        user: Any = request.user
        if twofactor.asks_code(user) and not user.is_verified():
            # Someone else's second factor must not be replaced on the
            # strength of a session that never proved it.
            return render(request, "queenadmin/two_factor.html", {"needs_login": True}, status=403)
    else:
        waiting = twofactor.pending(request)
        if waiting is None or twofactor.asks_code(waiting[0]) or not twofactor.required(waiting[0]):
            return redirect("dashboard:login")
        user = waiting[0]
    form = CodeForm()
    if request.method == "POST":
        if request.POST.get("step") == "begin":
            twofactor_enrol_begin(user=user)
            return redirect("dashboard:two_factor")
        form = CodeForm(request.POST)
        if form.is_valid():
            via = "dashboard"
            enrolled = twofactor_enrol_confirm(
                user=user, code=form.cleaned_data["code"], who=Who(user.get_username(), "", via)
            )
            if enrolled.confirmed:
                next_url = "/"
                if waiting is not None:
                    next_url = waiting[1]["next"]
                    _complete(request, user, enrolled.device)
                else:
                    otp_login(request, enrolled.device)
                codes = [f"{c[:4]}-{c[4:]}" for c in enrolled.recovery_codes]
                # Shown in this answer only (never_cache: not kept by the browser either).
                return render(request, "queenadmin/two_factor_codes.html", {"codes": codes, "next": next_url})
            form.add_error("code", "That code does not match the new authenticator. Enter the code it shows now.")
    enrolment = twofactor_enrolment(user=user)
    context = {
        "enrolled": twofactor.asks_code(user),
        "required": twofactor.required(user),
        "in_login": waiting is not None,
        "enrolment": enrolment,
        "qr": mark_safe(_qr_svg(enrolment.uri)) if enrolment else "",
        "form": form,
        "username": user.get_username(),
    }
    return render(request, "queenadmin/two_factor.html", context, status=422 if form.errors else 200)


class LogoutView(auth_views.LogoutView):
    """Django's logout; then the provider's, for a single sign-on session."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Imported here, as the sign-in views are (dashboard/urls.py): the
        # provider's library costs a worker memory only where it is used.
        from queenadmin.dashboard import sso

        at_provider = sso.provider_logout_url(request)
        response: HttpResponse = super().post(request, *args, **kwargs)
        if at_provider is None:
            return response
        config = sso_offered()
        context = {"url": at_provider, "provider": config.provider_name if config is not None else ""}
        return render(request, "queenadmin/signed_out.html", context)
