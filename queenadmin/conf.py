"""App settings, ``QUEENADMIN_<NAME>``, looked up on every access.

Reading ``django.conf.settings`` lazily keeps ``override_settings`` working
in tests and avoids import-time coupling to the settings module.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings


class _Settings:
    #: Serve /api/v1 without a bearer token (local development only).
    OPEN_API: bool = False
    #: Seconds a validated API token is trusted without asking the database
    #: again; a revocation reaches every replica within this time.
    TOKEN_CACHE_SECONDS: float = 1.0
    #: Seconds between reaper passes over expired KV rows.
    REAPER_INTERVAL_SECONDS: float = 5.0
    #: Rows the reaper deletes per statement.
    REAPER_BATCH_SIZE: int = 500
    #: KV protocol limits (protocol.md section 2.12).
    KV_MAX_OPS_PER_CALL: int = 256
    KV_MAX_KEYS_PER_CALL: int = 1024
    KV_MAX_KEY_BYTES: int = 512
    KV_MAX_VALUE_BYTES: int = 64 * 1024
    #: Request body limit, answered 413 in plain text (protocol 1.1).
    MAX_BODY_BYTES: int = 64 * 1024 * 1024

    def __getattribute__(self, name: str) -> Any:
        if name.isupper():
            default = object.__getattribute__(self, name)
            return getattr(django_settings, f"QUEENADMIN_{name}", default)
        return object.__getattribute__(self, name)


settings = _Settings()
