"""The first start's credentials on disk, and when they go.

``serve --bootstrap`` makes the ``admin`` account and an admin-scope API
token on a first start and writes both into the data folder
(``plumbing.files.FIRST_RUN_NOTES``, 0600), so that an operator who missed
the terminal can read them once. They are removed as soon as they are no
longer needed: the account named in them has logged in (the dashboard or
the admin), or their token is revoked. Until then a copy of the data folder
holds a usable password and token.

Each process removes its own data folder's notes: the one that sees the
login or the revocation at once (``first_run_logged_in``,
``first_run_settle``), and every other replica the next time it starts
(``serve`` calls ``first_run_settle``), from what the database says then.
``tokens.token_revoke`` and ``logins`` call this module; it reads the
token's row itself, so it imports neither.
Notes whose token this store never made are left alone: they belong to
another database (a test database beside a developer's ``data/``, say).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from django.conf import settings
from django.contrib.auth import get_user_model

from queenadmin.models import ApiToken
from queenadmin.plumbing import files

#: Why the notes were removed.
Removed = Literal["admin logged in", "token revoked"]


def _data_dir(data_dir: Path | None) -> Path:
    return data_dir if data_dir is not None else Path(settings.DATA_DIR)


def _token_revoked(token: str) -> bool | None:
    """Whether the token ``token`` is revoked, read from the database (no
    cache); None when this store never made it."""
    found = list(ApiToken.objects.filter(token_hash=ApiToken.hash_of(token)).values_list("revoked_at", flat=True)[:1])
    return found[0] is not None if found else None


def first_run_logged_in(*, username: str, data_dir: Path | None = None) -> bool:
    """Remove the notes when ``username``, which has just logged in, is the
    account they name in this store; return whether this call removed them.
    Costs a login one look at the data folder, and one query when the notes
    name that account."""
    notes = files.first_run_notes_read(_data_dir(data_dir))
    if notes is None or notes.username != username or _token_revoked(notes.token) is None:
        return False
    return files.first_run_notes_remove(notes)


def first_run_settle(*, data_dir: Path | None = None) -> Removed | None:
    """Remove the notes when the database says they are no longer needed:
    the account they name has logged in before, or their token is revoked.
    Return why this call removed them, or None (no notes, still needed, or
    made for another store: their token is not in this one). Not inside a
    transaction: call it after the commit that revoked the token."""
    notes = files.first_run_notes_read(_data_dir(data_dir))
    if notes is None:
        return None
    revoked = _token_revoked(notes.token)
    if revoked is None:
        return None
    user_model = get_user_model()
    last_logins = user_model.objects.filter(**{user_model.USERNAME_FIELD: notes.username}).values_list(
        "last_login", flat=True
    )
    reason: Removed
    if revoked:
        reason = "token revoked"
    elif any(at is not None for at in last_logins):
        reason = "admin logged in"
    else:
        return None
    return reason if files.first_run_notes_remove(notes) else None
