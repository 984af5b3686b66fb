"""Imported once by the ``spawn`` fixture's fork server, before it forks.

Every race-test process is then a fork of a process that has Django set up
and the domain imported, instead of a fresh interpreter importing them
(sixteen such imports took 9 s on two busy cores). Nothing here opens a
database connection: each child opens its own.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")

import django

django.setup()

import queenadmin.api.wire.kv  # noqa: E402
import queenadmin.domain.kv  # noqa: E402
import queenadmin.domain.locks  # noqa: E402
import queenadmin.domain.queues  # noqa: E402
import queenadmin.domain.timers  # noqa: E402
import queenadmin.domain.transactions  # noqa: E402, F401
