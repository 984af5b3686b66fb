"""What a database from an earlier queenadmin needs before ``migrate``.

Migrations 0001 to 0014 were squashed into one. A database that had all of
them counts the squashed one as applied; a new one gets it whole. A database
that had only some of them cannot be carried on by the squashed migration,
and Django then leaves it out of the plan silently: ``migrate`` would say
"no migrations to apply" over a schema the code no longer fits, and every
call would fail later. ``refuse_partly_migrated`` stops ``migrate`` first
with what to do instead.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.core.management.base import CommandError
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder

#: The commit whose migrations carry a partly migrated database to 0014.
LAST_UNSQUASHED = "f781ecd"
SQUASHED = "queenadmin.migrations.0001_squashed_0014_kv_lock_and_read_function"


def replaced() -> list[tuple[str, str]]:
    """The migrations the squashed one replaces, in order."""
    return list(importlib.import_module(SQUASHED).REPLACED)


def partly_applied(using: str) -> list[str]:
    """The replaced migrations a database has, when it has some but not all.

    Empty when it has all of them (the squashed one counts as applied) or
    none (a new database, or one from before queenadmin).
    """
    recorder = MigrationRecorder(connections[using])
    if not recorder.has_table():
        return []
    applied = recorder.applied_migrations()
    names = replaced()
    have = [name for app, name in names if (app, name) in applied]
    return have if 0 < len(have) < len(names) else []


def refuse_partly_migrated(*, using: str, **_: Any) -> None:
    """``pre_migrate`` receiver: stop ``migrate`` on a partly migrated database."""
    have = partly_applied(using)
    if have:
        raise CommandError(
            f"This database was migrated by an earlier queenadmin up to {have[-1]}, which this "
            "version cannot continue (its migrations 0001-0014 are now one). Migrate it with "
            f"queenadmin at commit {LAST_UNSQUASHED} first (`manage.py migrate`), then upgrade."
        )
