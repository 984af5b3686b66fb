"""A key's history on its page (issue 41): versions, a diff, the value at a
time, and "revert to this version" as a compare-and-set."""

from __future__ import annotations

import difflib
import json
from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render

from queenadmin.dashboard import links, live
from queenadmin.dashboard.views.access import HtmxHttpRequest, who_of
from queenadmin.domain import kv
from queenadmin.domain.kv.operator import kv_operator_revert_to
from queenadmin.errors import KVBadRequest, KVPayloadTooLarge

#: Versions in one page of the key's history table.
PAGE = 50


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _number(raw: str | None) -> int | None:
    return int(raw) if raw and raw.isascii() and raw.isdigit() and len(raw) <= 19 else None


def _shown(row: kv.KVVersionRow) -> dict[str, Any]:
    """A version as the table shows it."""
    if row.op == "delete":
        text = ""
    elif row.kept:
        text = json.dumps(row.value, ensure_ascii=False)
    else:
        text = f"sha256:{row.digest} ({row.size} bytes, not kept)"
    return {
        "version": row.version,
        "op": row.op,
        "at": row.at,
        "by": row.by,
        "preview": text if len(text) <= 120 else text[:119] + "…",
        "revertible": row.op == "delete" or row.kept,
    }


def _text_of(row: kv.KVVersionRow | None) -> list[str]:
    if row is None or row.op == "delete":
        return []
    if not row.kept:
        return [f"(value over the history's size limit: sha256 {row.digest}, {row.size} bytes)"]
    return _pretty(row.value).splitlines()


def _diff(namespace: str, key: str, older: int, newer: int) -> dict[str, Any] | None:
    """The line diff from version ``older`` to ``newer`` (a delete is empty)."""
    if older > newer:
        older, newer = newer, older
    a = kv.kv_version(namespace=namespace, key=key, version=older)
    b = kv.kv_version(namespace=namespace, key=key, version=newer)
    if a is None or b is None:
        return None
    lines = []
    for line in difflib.unified_diff(_text_of(a), _text_of(b), f"v{older}", f"v{newer}", lineterm="", n=3):
        kind = (
            "add" if line.startswith("+") else "del" if line.startswith("-") else "hunk" if line.startswith("@") else ""
        )
        lines.append({"text": line, "kind": kind})
    return {"a": older, "b": newer, "lines": lines, "same": not lines}


def _at(raw: str | None) -> datetime | None:
    """A time the form gives (``YYYY-MM-DDTHH:MM[:SS]``, UTC, or with an offset)."""
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.strip())
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def history_context(namespace: str, key: str, params: QueryDict) -> dict[str, Any]:
    """The history panel of ``namespace``/``key``'s page, from the query
    string: ``before`` (the table's page), ``a`` and ``b`` (a diff),
    ``at`` (the value at a time)."""
    if namespace == kv.LOCKS_NAMESPACE:
        return {}
    before = _number(params.get("before"))
    try:
        page = kv.kv_history(namespace=namespace, key=key, before=before, limit=PAGE)
    except (KVBadRequest, KVPayloadTooLarge):
        # A key stored before today's rules (over the key size limit): no
        # write keeps its history now, and the key's page still shows it.
        return {"history_kept": True, "history_unreadable": True}
    out: dict[str, Any] = {
        "versions": [_shown(v) for v in page.versions],
        "history_before": before,
        "history_next": page.next_before,
        "history_kept": kv.keep.recorded(namespace),
    }
    a, b = _number(params.get("a")), _number(params.get("b"))
    if a is not None and b is not None:
        out["diff"] = _diff(namespace, key, a, b)
        out["diff_asked"] = True
    raw_at = params.get("at")
    if raw_at:
        moment = _at(raw_at)
        out["at_raw"] = raw_at
        out["at_error"] = None if moment is not None else "Give a time as 2026-10-08T10:00 (UTC)."
        if moment is not None:
            found = kv.kv_version_at(namespace=namespace, key=key, at=moment)
            out["at_version"] = None if found is None else {**_shown(found), "text": "\n".join(_text_of(found))}
            out["at_moment"] = moment
    return out


def revert_page(request: HtmxHttpRequest, namespace: str, key_page: Any) -> HttpResponse:
    """GET: confirm a revert of the key to a version of its history. POST:
    put that value back (delete, for a delete's version) only while the
    key is still at the version shown (``expect``). ``namespace`` is
    checked and ``key_page`` is the key's live page (``views/kv.py``'s
    ``revert``, the route)."""
    source = request.POST if request.method == "POST" else request.GET
    form = "queenadmin/kv_revert.html" + ("#revert-form" if request.htmx else "")
    key = source.get("key", "")
    version = _number(source.get("version"))
    expect = _number(source.get("expect"))
    ctx: dict[str, Any] = {
        "namespace": namespace,
        "key": key,
        "version": version,
        "expect": expect,
        "reason": source.get("reason", ""),
        "page": "kv",
    }
    target = None if version is None or not key else kv.kv_version(namespace=namespace, key=key, version=version)
    if target is None or version is None or expect is None:
        ctx["error"] = "Name the key, a version of its history, and the version you see now."
        return render(request, form, ctx, status=404 if target is None else 422)
    ctx["target"] = _shown(target)
    ctx["target_text"] = "\n".join(_text_of(target))
    if request.method == "GET":
        return render(request, form, ctx)
    try:
        result = kv_operator_revert_to(
            namespace=namespace, key=key, version=version, expect=expect, who=who_of(request)
        )
    except (KVBadRequest, KVPayloadTooLarge) as exc:
        ctx["error"] = str(exc)
        return render(request, form, ctx, status=422)
    ctx["result"] = result
    ctx["current_text"] = _pretty(result.current_value) if result.current_version else ""
    if request.htmx:
        return live.answer_action(
            request, key_page, "queenadmin/kv_revert.html#revert-outcome", ctx, extra={"ns": namespace, "key": key}
        )
    if result.applied:
        messages.success(request, f"{namespace}/{key} reverted to the value of version {version}.")
    elif result.why == "moved":
        messages.warning(
            request,
            f"Not reverted: {namespace}/{key} is at version {result.current_version} now, not {expect}.",
        )
    else:
        messages.warning(request, f"Not reverted: version {version} of {namespace}/{key} cannot be put back.")
    return redirect(links.kv_key_url(namespace, key))
