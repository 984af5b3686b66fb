"""A page's query string: reading a number from it, and links that keep
its filters (``query``) and page through it by key (``paging``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.http import QueryDict


def int_param(params: Mapping[str, str], name: str) -> int | None:
    """A non-negative integer parameter, or None when absent or bad."""
    raw = params.get(name, "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


def query(params: dict[str, Any] | Any, **changes: Any) -> str:
    """``?a=1&b=2`` from ``params`` with ``changes`` applied; empty values dropped.

    For links that keep a page's filters (``after`` is reset by default,
    since a new filter starts at the first page).
    """
    merged = {k: params.get(k, "") for k in params}
    merged.setdefault("after", "")
    if "after" not in changes:
        merged["after"] = ""
    merged.update(changes)
    kept = {k: v for k, v in merged.items() if v not in ("", None)}
    return "?" + urlencode(kept) if kept else "?"


def paging(params: QueryDict, next_after: str | None) -> dict[str, str]:
    """A keyset page's links, keeping ``params``' filters: ``next_query``
    (after ``next_after``; empty on the last page) and ``first_query``
    (empty on the first page)."""
    return {
        "next_query": query(params, after=next_after) if next_after else "",
        "first_query": query(params) if params.get("after") else "",
    }
