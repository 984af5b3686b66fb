"""Files of the data folder, private to the user who runs the server.

Plain functions with no Django imports: ``settings.py`` uses them before
Django is configured.
"""

from __future__ import annotations

import os
from pathlib import Path


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
