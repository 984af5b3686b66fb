from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

from queenadmin.plumbing import db

if TYPE_CHECKING:
    _TextField = models.TextField[str, str]
else:
    _TextField = models.TextField


class ByteOrderTextField(_TextField):
    """Text that sorts and compares as its UTF-8 bytes on every backend.

    SQLite's default BINARY collation already compares bytes. PostgreSQL
    compares with the database locale unless told otherwise, so the column
    gets ``COLLATE "C"`` there: prefix pages and ``after`` cursors then follow
    the same order on both databases, which is the order the protocol
    promises.
    """

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        params = super().db_parameters(connection)
        collation = db.byte_order_collation(connection)
        if collation is not None:
            params["collation"] = collation
        return params
