"""ASGI entry point: ``serve`` runs ``application`` (or, counting requests
for ``/metrics``, ``metered_application``). Both live in
``queenadmin/server/``."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")

import django

django.setup()

from queenadmin.server.app import application  # noqa: E402
from queenadmin.server.metered import application as metered_application  # noqa: E402

__all__ = ["application", "metered_application"]
