"""Files of the data folder, private to the user who runs the server.

Plain functions with no Django imports: ``settings.py`` uses them before
Django is configured.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: ``serve --bootstrap``'s notes in the data folder: the first admin
#: account's password and the first API token, until they are no longer
#: needed (``domain.firstrun``).
FIRST_RUN_NOTES = "first-run.txt"
#: What the notes say once they are removed, in every message that names them.
FIRST_RUN_REMOVAL = "removed once admin logs in or the token is revoked"

_NOTES_USER = re.compile(r"\(user (\S+), password \S+\)")
_NOTES_TOKEN = re.compile(r"^  API token: (\S+)$", re.MULTILINE)


def private_data_dir(path: Path) -> Path:
    """``path`` (the data folder), created 0700: it holds the database, the
    secret key and the first-run notes, which no other local user may read.
    A folder left 0755 by an older version is tightened."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def create_private_file(path: Path, text: str = "") -> bool:
    """Create ``path`` 0600 with ``text``; False if it already exists.

    The mode is given to ``open`` itself, so the file is never readable by
    others, not even between its creation and a chmod.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return True


@dataclass(frozen=True, slots=True)
class FirstRunNotes:
    """The first-run notes found in a data folder, and whose secrets they hold."""

    path: Path
    username: str
    token: str


def first_run_notes_write(data_dir: Path, *, base_url: str, username: str, password: str, token: str) -> Path:
    """Write the first start's notes into ``data_dir`` (0600, replacing any
    left from an earlier start) and return their path. The text says what
    the two secrets are for and when the file goes."""
    notes = private_data_dir(data_dir) / FIRST_RUN_NOTES
    text = (
        f"First start: created a local {username} user and an admin-scope API token (shown this once).\n"
        f"  Dashboard: {base_url}/  (user {username}, password {password})\n"
        f"  Admin:     {base_url}/admin/\n"
        f"  API docs:  {base_url}/api/v1/docs\n"
        f"  API token: {token}\n"
        f"  Try:       curl -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' \\\n"
        f'               -d \'{{"operations":[{{"op":"put","ns":"demo","key":"hello","value":1,"forever":true}}]}}\' \\\n'
        f"               {base_url}/api/v1/kv\n"
        f"Kept in {notes}, readable by you only; {FIRST_RUN_REMOVAL}: copy the token elsewhere if you need it.\n"
    )
    notes.unlink(missing_ok=True)
    create_private_file(notes, text)
    return notes


def first_run_notes_read(data_dir: Path) -> FirstRunNotes | None:
    """The first-run notes in ``data_dir``, or None when there are none (or
    they name no account and token: then they are left alone)."""
    path = data_dir / FIRST_RUN_NOTES
    try:
        text = path.read_text()
    except OSError:  # Absent, or not ours to read: a login must not fail on it.
        return None
    user, token = _NOTES_USER.search(text), _NOTES_TOKEN.search(text)
    if user is None or token is None:
        return None
    return FirstRunNotes(path, user.group(1), token.group(1))


def first_run_notes_remove(notes: FirstRunNotes) -> bool:
    """Remove the notes; False if another process removed them first (or
    they cannot be removed: a login must not fail on it)."""
    try:
        notes.path.unlink()
    except OSError:
        return False
    return True
