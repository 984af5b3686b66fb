"""Who a caller is: Queen's JWTs (``jwt``) and their keys (``jwks``); who
may sign in to the dashboard through an OpenID provider, as what (``sso``,
with the provider's metadata from ``discovery``).

The API's bearer check (``api/bearer.py``) asks ``jwt_check`` about a
bearer token that is a JWT and our own ``domain/tokens.py`` about the rest.
Nothing here knows HTTP: refusals are ``QueenError`` subclasses carrying
Queen's own messages.
"""

from __future__ import annotations

from queenadmin.domain.identity.jwt import (
    LEVELS,
    Identity,
    InsufficientPermissions,
    JwtConfig,
    Level,
    TokenRefused,
    jwt_check,
    jwt_check_cached,
    jwt_config,
    jwt_prefetch,
    jwt_skips,
    jwt_start_refusal,
    jwt_start_warnings,
    looks_like_jwt,
)

__all__ = [
    "LEVELS",
    "Identity",
    "InsufficientPermissions",
    "JwtConfig",
    "Level",
    "TokenRefused",
    "jwt_check",
    "jwt_check_cached",
    "jwt_config",
    "jwt_prefetch",
    "jwt_skips",
    "jwt_start_refusal",
    "jwt_start_warnings",
    "looks_like_jwt",
]
