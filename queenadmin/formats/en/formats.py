from __future__ import annotations

DATETIME_FORMAT = "N j, Y, P T"
SHORT_DATETIME_FORMAT = "m/d/Y P T"
