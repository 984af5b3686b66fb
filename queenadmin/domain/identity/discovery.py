"""An OpenID provider's metadata, read from its discovery document.

``provider_metadata(issuer)`` fetches ``<issuer>/.well-known/openid-configuration``
(OpenID Connect Discovery 1.0) at its first call and keeps what it found for
the life of the process (until a settings change); a fetch that fails is
not kept, so the next sign-in tries again. The document must name the
issuer it was fetched for (section 4.3: a trailing ``/`` aside), and every
endpoint must be HTTPS (plain HTTP only on a loopback address, as the
issuer itself).
"""

from __future__ import annotations

import ipaddress
import json
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.core.signals import setting_changed

#: Seconds one fetch from the provider (discovery, token, keys, userinfo) may take.
PROVIDER_TIMEOUT_SECONDS = 10.0

WELL_KNOWN = "/.well-known/openid-configuration"


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read or is unusable."""


@dataclass(frozen=True, slots=True)
class ProviderMetadata:
    """What queenadmin uses of a provider's discovery document."""

    #: As the document spells it: what an ID token's ``iss`` must be.
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    #: "" when the provider has none (the ID token's claims are then all).
    userinfo_endpoint: str
    #: "" when the provider has no RP-initiated logout.
    end_session_endpoint: str
    #: The provider takes PKCE with ``S256``.
    pkce_s256: bool
    #: The client authenticates at the token endpoint with HTTP Basic
    #: (``client_secret_basic``, the default), else in the form's body.
    basic_auth: bool


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_refusal(url: str, *, query: bool = False) -> str | None:
    """Why ``url`` cannot be a provider's address, or None: HTTPS with a host,
    or HTTP on a loopback address; no fragment, no user info, and a query
    only where ``query`` allows it (an endpoint may have one, an issuer not)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme not in ("https", "http") or not host:
        return "not an https:// URL with a host"
    if parts.scheme == "http" and not loopback(host):
        return "plain http:// only on a loopback address (use https://)"
    if (parts.query and not query) or parts.fragment or parts.username or parts.password:
        return "it has a query, a fragment or a user name"
    return None


_cache: dict[str, ProviderMetadata] = {}
_lock = threading.Lock()


def provider_metadata(issuer: str) -> ProviderMetadata:
    """The metadata of the provider at ``issuer``, fetched once (see the
    module); raise ``ProviderUnavailable`` saying why it cannot be had."""
    found = _cache.get(issuer)
    if found is not None:
        return found
    with _lock:
        found = _cache.get(issuer)
        if found is None:
            found = _cache[issuer] = metadata_of(issuer, _fetch(issuer.rstrip("/") + WELL_KNOWN))
    return found


def _fetch(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PROVIDER_TIMEOUT_SECONDS) as answer:
            document = json.loads(answer.read())
    except (OSError, ValueError) as exc:
        raise ProviderUnavailable(f"{url} could not be read: {exc}") from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} is not a discovery document (no JSON object)")
    return document


def metadata_of(issuer: str, document: dict[str, Any]) -> ProviderMetadata:
    """The metadata in ``document``, fetched for ``issuer``; raise
    ``ProviderUnavailable`` when it names another issuer or lacks an endpoint."""
    named = document.get("issuer")
    if not isinstance(named, str) or named.rstrip("/") != issuer.rstrip("/"):
        raise ProviderUnavailable(f"the discovery document names the issuer {named!r}, not {issuer!r}")

    def endpoint(key: str, *, required: bool = True) -> str:
        value = document.get(key) or ""
        if not isinstance(value, str) or (required and not value):
            raise ProviderUnavailable(f"the discovery document has no {key}")
        refused = url_refusal(value, query=True) if value else None
        if refused is not None:
            raise ProviderUnavailable(f"the discovery document's {key} {value!r}: {refused}")
        return value

    methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    return ProviderMetadata(
        issuer=named,
        authorization_endpoint=endpoint("authorization_endpoint"),
        token_endpoint=endpoint("token_endpoint"),
        jwks_uri=endpoint("jwks_uri"),
        userinfo_endpoint=endpoint("userinfo_endpoint", required=False),
        end_session_endpoint=endpoint("end_session_endpoint", required=False),
        pkce_s256="S256" in (document.get("code_challenge_methods_supported") or ()),
        basic_auth="client_secret_basic" in methods or "client_secret_post" not in methods,
    )


def _forget(**kwargs: Any) -> None:
    with _lock:
        _cache.clear()


setting_changed.connect(_forget, dispatch_uid="queenadmin.domain.identity.discovery.forget")
