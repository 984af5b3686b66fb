"""Single sign-on through an OpenID provider, with mozilla-django-oidc.

``/login/sso/`` sends the browser to the provider (state, nonce and, where
the provider takes it, PKCE, kept in the session by the library);
``/login/sso/callback/`` takes it back: the library exchanges the code,
checks the state and the nonce, and verifies the ID token's signature with
the provider's keys; ``SsoBackend`` also checks its ``iss``, ``aud``
(``azp`` when there are several), ``exp`` and ``iat``, which the library
leaves out, then hands the claims (the ID token's, with the userinfo
answer's of the same ``sub``) to ``domain.identity.sso.sso_sign_in``, whose
rules decide. A refusal is a page saying why (403), with no session; a
sign-in that did not complete (the provider said no, a replayed or unknown
state, a token that fails a check) is a page too (400), and so is a
provider that cannot be reached (502).

The library reads its settings through ``get_settings``, which here answers
from ``queenadmin.conf`` and the provider's discovery document
(``domain/identity/discovery.py``), read at the first sign-in, not at start.

A session that signed in here is marked by its backend
(``twofactor.SSO_BACKEND``): it skips queenadmin's second factor (the
provider owns that) and survives ``LOCAL_LOGIN=0``. Logging it out also
ends the provider's session when the provider has an
``end_session_endpoint`` (``provider_logout_url``).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import jwt
from django.conf import settings as django_settings
from django.contrib.auth import BACKEND_SESSION_KEY, get_user_model
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from queenadmin.dashboard import twofactor
from queenadmin.domain.identity.discovery import (
    PROVIDER_TIMEOUT_SECONDS,
    ProviderMetadata,
    ProviderUnavailable,
    provider_metadata,
)
from queenadmin.domain.identity.sso import SsoConfig, SsoSignIn, sso_offered, sso_sign_in

log = logging.getLogger(__name__)

#: Seconds of leeway for the ID token's ``exp`` and ``iat``.
ID_TOKEN_LEEWAY_SECONDS = 60
#: The session key where the library keeps the ID token (for the logout).
ID_TOKEN_SESSION_KEY = "oidc_id_token"
#: Request attributes that tell the callback's page what happened.
REFUSED = "queenadmin_sso_refused"
FAILED = "queenadmin_sso_failed"


def _provider() -> tuple[SsoConfig, ProviderMetadata]:
    config = sso_offered()
    if config is None:
        raise Http404("single sign-on is not configured")
    return config, provider_metadata(config.issuer)


def library_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's setting ``attr``, from queenadmin's settings and
    the provider's metadata (see the module); the library's default else."""
    config = sso_offered()
    if config is not None:
        fixed: dict[str, Any] = {
            "OIDC_RP_CLIENT_ID": config.client_id,
            "OIDC_RP_CLIENT_SECRET": config.client_secret,
            "OIDC_RP_SCOPES": config.scopes,
            "OIDC_RP_SIGN_ALGO": config.signing_algorithm,
            "OIDC_RP_IDP_SIGN_KEY": None,
            "OIDC_VERIFY_SSL": True,
            "OIDC_TIMEOUT": PROVIDER_TIMEOUT_SECONDS,
            "OIDC_PROXY": None,
            "OIDC_AUTHENTICATION_CALLBACK_URL": "dashboard:sso_callback",
            "OIDC_USE_NONCE": True,
            "OIDC_ALLOW_UNSECURED_JWT": False,
            "OIDC_STORE_ACCESS_TOKEN": False,
            # Kept for the provider's logout (its id_token_hint).
            "OIDC_STORE_ID_TOKEN": True,
            "OIDC_REDIRECT_FIELD_NAME": "next",
            "LOGIN_REDIRECT_URL": django_settings.LOGIN_REDIRECT_URL,
        }
        if attr in fixed:
            return fixed[attr]
        provider = {
            "OIDC_OP_AUTHORIZATION_ENDPOINT": lambda p: p.authorization_endpoint,
            "OIDC_OP_TOKEN_ENDPOINT": lambda p: p.token_endpoint,
            "OIDC_OP_USER_ENDPOINT": lambda p: p.userinfo_endpoint,
            "OIDC_OP_JWKS_ENDPOINT": lambda p: p.jwks_uri,
            "OIDC_USE_PKCE": lambda p: p.pkce_s256,
            "OIDC_TOKEN_USE_BASIC_AUTH": lambda p: p.basic_auth,
        }
        if attr in provider:
            return provider[attr](provider_metadata(config.issuer))
    return import_from_settings(attr, *default)


class SsoBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    """mozilla-django-oidc's backend with queenadmin's rules (see the module)."""

    get_settings = staticmethod(library_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django makes a backend for every login and every request's user:
        # the library's own __init__ would read the provider's metadata
        # then. It is read when a callback is authenticated instead.
        self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        # Only the callback, which passes the nonce it kept: never a
        # password form, whatever its query string says.
        if request is None or "nonce" not in kwargs or request.path != reverse("dashboard:sso_callback"):
            return None
        try:
            config, provider = _provider()
            self.OIDC_OP_TOKEN_ENDPOINT = provider.token_endpoint
            self.OIDC_OP_USER_ENDPOINT = provider.userinfo_endpoint
            self.OIDC_OP_JWKS_ENDPOINT = provider.jwks_uri
            self.OIDC_RP_CLIENT_ID = config.client_id
            self.OIDC_RP_CLIENT_SECRET = config.client_secret
            self.OIDC_RP_SIGN_ALGO = config.signing_algorithm
            self.OIDC_RP_IDP_SIGN_KEY = None
            return super().authenticate(request, **kwargs)
        except (ProviderUnavailable, SuspiciousOperation, jwt.PyJWTError, OSError, KeyError, ValueError) as exc:
            # OSError: requests' errors (the token, keys or userinfo call).
            log.warning("single sign-on did not complete: %s: %s", type(exc).__name__, exc)
            setattr(request, FAILED, str(exc) or type(exc).__name__)
            return None

    def get_payload_data(self, token: str, key: Any) -> dict[str, Any]:
        """The ID token's claims, checked: signature and ``alg``, ``iss``,
        ``aud`` and ``azp``, ``exp`` and ``iat`` (the nonce: the library)."""
        config, provider = _provider()
        algorithm = jwt.get_unverified_header(token).get("alg")
        if algorithm != config.signing_algorithm:
            raise SuspiciousOperation(f"the ID token is signed with {algorithm!r}, not {config.signing_algorithm}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[config.signing_algorithm],
                audience=config.client_id,
                issuer=provider.issuer,
                leeway=ID_TOKEN_LEEWAY_SECONDS,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"the ID token was refused: {exc}") from None
        audience = claims["aud"]
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != config.client_id:
            raise SuspiciousOperation("the ID token is for several audiences and its azp is not this client")
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            answer = self.get_userinfo(access_token, id_token, payload)
            if answer.get("sub") != payload.get("sub"):
                why = "the userinfo answer is about another sub than the ID token"
                # The library logs this one and returns no user.
                setattr(self.request, FAILED, why)
                raise SuspiciousOperation(why)
            claims.update(answer)
        outcome: SsoSignIn = sso_sign_in(claims=claims)
        if outcome.user_id is None:
            setattr(self.request, REFUSED, outcome)
            return None
        return self.UserModel.objects.get(pk=outcome.user_id)


def _failure_page(request: HttpRequest, why: str, *, status: int) -> HttpResponse:
    config = sso_offered()
    provider = config.provider_name if config is not None else "the provider"
    return render(request, "queenadmin/sso_failed.html", {"provider": provider, "why": why}, status=status)


class SsoBegin(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """``/login/sso/``: to the provider, ``?next=`` kept for the way back."""

    get_settings = staticmethod(library_setting)

    def __init__(self, **kwargs: Any) -> None:
        # The library's reads the provider's metadata here, before any
        # answer can say that it cannot be had.
        View.__init__(self, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        try:
            config, provider = _provider()
        except ProviderUnavailable as exc:
            log.warning("single sign-on: %s", exc)
            return _failure_page(request, f"The provider cannot be reached: {exc}", status=502)
        self.OIDC_OP_AUTH_ENDPOINT = provider.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = config.client_id
        response: HttpResponseBase = super().get(request)
        return response


class SsoCallback(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """``/login/sso/callback/``: the provider's answer (see the module)."""

    get_settings = staticmethod(library_setting)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        if sso_offered() is None:
            raise Http404("single sign-on is not configured")
        try:
            response: HttpResponseBase = super().get(request)
        except SuspiciousOperation as exc:
            # An unknown state: a replayed answer, or one for another session.
            log.warning("single sign-on callback refused: %s", exc)
            return _failure_page(
                request, "This answer from the provider is not for this browser's sign-in.", status=400
            )
        return response

    def login_success(self) -> HttpResponseBase:
        # A password login waiting for its code is abandoned.
        twofactor.end_pending(self.request)
        response: HttpResponseBase = super().login_success()
        return response

    def login_failure(self) -> HttpResponseBase:
        request = self.request
        refused: SsoSignIn | None = getattr(request, REFUSED, None)
        if refused is not None:
            config = sso_offered()
            context = {"refusal": refused.refusal, "provider": config.provider_name if config else ""}
            return render(request, "queenadmin/login_refused.html", context, status=403)
        why = getattr(request, FAILED, "") or request.GET.get("error_description") or request.GET.get("error") or ""
        return _failure_page(request, why or "The provider's answer carried no sign-in.", status=400)


def signed_in_by_sso(request: HttpRequest) -> bool:
    return bool(request.session.get(BACKEND_SESSION_KEY) == twofactor.SSO_BACKEND)


def provider_logout_url(request: HttpRequest) -> str | None:
    """Where the browser ends its provider session after this session's
    logout (RP-Initiated Logout 1.0), or None: not signed in here, the
    logout at the provider turned off, or no ``end_session_endpoint``.
    Read before the session goes (it holds the ID token)."""
    config = sso_offered()
    if config is None or not config.logout_at_provider or not signed_in_by_sso(request):
        return None
    try:
        endpoint = provider_metadata(config.issuer).end_session_endpoint
    except ProviderUnavailable:
        return None
    if not endpoint:
        return None
    params = {
        "client_id": config.client_id,
        "post_logout_redirect_uri": request.build_absolute_uri(reverse("dashboard:login")),
    }
    id_token = request.session.get(ID_TOKEN_SESSION_KEY)
    if isinstance(id_token, str):
        params["id_token_hint"] = id_token
    parts = urlsplit(endpoint)
    query = urlencode([*parse_qsl(parts.query), *params.items()])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
