"""``/kv/``: namespaces; ``/kv/<ns>/``: keys; edit and delete as compare-and-set."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

from django.contrib import messages
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import links, live
from queenadmin.dashboard.views import kv_history
from queenadmin.dashboard.views.access import HtmxHttpRequest, User, staff_action, staff_page, who_of
from queenadmin.dashboard.views.querystring import paging, query
from queenadmin.domain import events, kv
from queenadmin.domain.kv.operator import Expiry, OperatorWrite, kv_operator_delete, kv_operator_edit
from queenadmin.domain.locks import caller_of
from queenadmin.domain.locks.operator import _split
from queenadmin.domain.masking import mask_token
from queenadmin.errors import KVBadRequest, KVPayloadTooLarge

LOCKS_NS = kv.LOCKS_NAMESPACE


def _row(row: kv.KVRow) -> dict[str, Any]:
    """A key as templates may see it; lock permits lose their owner."""
    shown: dict[str, Any] = {
        "key": row.key,
        "version": row.version,
        "expires_at": row.expires_at,
        "updated_at": row.updated_at,
        "created_at": row.created_at,
    }
    if row.namespace == LOCKS_NS:
        split = _split(row.key)
        owner = row.value.get("owner") if isinstance(row.value, dict) else None
        shown.update(
            lock=split[0] if split else row.key,
            owner_fp=mask_token(owner) if owner is not None else None,
            caller=caller_of(row.value),
            token_fp=mask_token(row.version),
        )
    else:
        shown["value"] = row.value
    return shown


def namespaces_context(user: User, params: QueryDict) -> dict[str, Any]:
    found = kv.kv_namespaces()
    return {"namespaces": found, "total": sum(n for _, n in found)}


KV = live.one_region_page(
    "kv",
    "queenadmin/kv.html",
    namespaces_context,
    "kv-namespaces",
    events.KV_GROUP,
    # One GROUP BY over every key (~70 ms at 100,000 keys on SQLite):
    # every 2 s at most, however hot the writes.
    gap=2.0,
)


def _about_namespace(message: dict[str, Any], params: QueryDict) -> bool:
    names = message.get("namespaces") or []
    return not names or params.get("ns", "") in names


def keys_context(user: User, params: QueryDict) -> dict[str, Any]:
    namespace, prefix, after = params.get("ns", ""), params.get("prefix", ""), params.get("after", "")
    page = kv.kv_list_stored(namespace=namespace, prefix=prefix, after=after, limit=app_settings.DASHBOARD_PAGE_SIZE)
    kept = params.copy()
    kept.pop("ns", None)
    return {
        "namespace": namespace,
        "locks_ns": namespace == LOCKS_NS,
        "prefix": prefix,
        "after": after,
        "rows": [_row(r) for r in page.rows],
        "stale_at": min((r.expires_at for r in page.rows if r.expires_at is not None), default=None),
        **paging(kept, page.next_after if page.truncated else None),
    }


def _namespace_page(name: str, template: str, context: live.Context) -> live.LivePage:
    """A live page of one namespace (``/kv/<ns>/...``, ``ns`` in its params):
    one region, named as the page, stale on a write in that namespace."""
    return live.one_region_page(name, template, context, name, events.KV_GROUP, match=_about_namespace, perm="kv")


KV_KEYS = _namespace_page("kv-keys", "queenadmin/kv_keys.html", keys_context)


@staff_page("kv")
def namespaces(request: HtmxHttpRequest) -> HttpResponse:
    """The namespaces; with ``?ns=`` (the page's "Open" form), that
    namespace's page, from the key ``prefix`` if one is given."""
    namespace = request.GET.get("ns", "").strip()
    if namespace:
        prefix = request.GET.get("prefix", "")
        return redirect(links.kv_url(namespace) + (query({"prefix": prefix}) if prefix else ""))
    return live.render_page(request, KV)


def _namespace_ok(namespace: str) -> bool:
    try:
        kv.check_namespace(namespace)
    except KVBadRequest:
        return False
    return True


def _namespace_or_404(namespace: str) -> str:
    try:
        return kv.check_namespace(namespace)
    except KVBadRequest:
        raise Http404("no such namespace") from None


@staff_page("kv")
def keys(request: HtmxHttpRequest, namespace: str) -> HttpResponse:
    # A namespace the rule refuses is shown while it holds keys: a database
    # may hold namespaces from before the rule.
    if not _namespace_ok(namespace) and not kv.kv_list_stored(namespace=namespace, limit=1).rows:
        raise Http404("no such namespace")
    params = request.GET.copy()
    params["ns"] = namespace
    return live.render_page(request, KV_KEYS, params=params)


def key_context(user: User, params: QueryDict) -> dict[str, Any]:
    namespace, key = params.get("ns", ""), params.get("key", "")
    row = kv.kv_get_stored(namespace=namespace, key=key) if namespace != LOCKS_NS else None
    return {
        "namespace": namespace,
        "key": key,
        "row": _row(row) if row else None,
        "value_text": _pretty(row.value) if row else "",
        "stale_at": row.expires_at if row else None,
        **kv_history.history_context(namespace, key, params),
    }


KV_KEY = _namespace_page("kv-key", "queenadmin/kv_key.html", key_context)


@staff_page("kv")
def key_detail(request: HtmxHttpRequest, namespace: str, key: str) -> HttpResponse:
    if namespace == LOCKS_NS:
        split = _split(key)
        return redirect(reverse("dashboard:locks") + query({"name": split[0] if split else key}))
    params = QueryDict(mutable=True)
    # The history panel's own choices: its page, a diff, a time.
    params.update({name: request.GET[name] for name in ("before", "a", "b", "at") if name in request.GET})
    params.update({"ns": namespace, "key": key})
    found = kv.kv_get_stored(namespace=namespace, key=key) is not None
    return live.render_page(request, KV_KEY, params=params, status=200 if found else 404)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def _expiry(raw: str) -> Expiry:
    raw = raw.strip().lower()
    if raw in ("", "keep"):
        return "keep"
    if raw in ("forever", "never", "none"):
        return "forever"
    try:
        seconds = int(raw)
    except ValueError:
        raise ValueError("Expiry is keep, forever, or a number of seconds.") from None
    if seconds <= 0:
        raise ValueError("Expiry seconds must be positive.")
    return timedelta(seconds=seconds)


def _version(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        return -1


def _from_key_page(request: HtmxHttpRequest) -> bool:
    """Whether an htmx request came from a key's own page (``kv_key``)."""
    path = unquote(urlsplit(request.headers.get("HX-Current-URL", "")).path)
    try:
        return resolve(path).view_name == "dashboard:kv_key"
    except Resolver404:
        return False


def _outcome(request: HtmxHttpRequest, namespace: str, ctx: dict[str, Any], result: OperatorWrite) -> HttpResponse:
    ctx["result"] = result
    ctx["current_text"] = _pretty(result.current_value) if result.current_version else ""
    if request.htmx:
        # Acting from the key's own page refreshes that page, else the list.
        if _from_key_page(request):
            page, extra = KV_KEY, {"ns": namespace, "key": ctx["key"]}
        else:
            page, extra = KV_KEYS, {"ns": namespace}
        return live.answer_action(request, page, "queenadmin/kv_action.html#outcome", ctx, extra=extra)
    verb = ctx["verb"]
    if result.applied:
        done = "deleted" if verb == "delete" else f"saved as version {result.version}"
        messages.success(request, f"{namespace}/{result.key} {done}.")
    elif result.current_version:
        messages.warning(
            request,
            f"Not {'deleted' if verb == 'delete' else 'saved'}: {namespace}/{result.key} is at version "
            f"{result.current_version} now, not {ctx['expect']}. Look at the current value first.",
        )
    else:
        messages.warning(
            request, f"Not {'deleted' if verb == 'delete' else 'saved'}: {namespace}/{result.key} is gone."
        )
    return redirect(links.kv_url(namespace))


def _begin(request: HtmxHttpRequest, namespace: str, verb: str) -> tuple[QueryDict, str, dict[str, Any]]:
    """An edit's or delete's form data, its template (the form's partial for
    htmx) and its context."""
    source = request.POST if request.method == "POST" else request.GET
    form = "queenadmin/kv_action.html" + (f"#{verb}-form" if request.htmx else "")
    return source, form, {"namespace": namespace, "key": source.get("key", ""), "verb": verb, "page": "kv"}


def _ask(request: HtmxHttpRequest, form: str, ctx: dict[str, Any], **more: Any) -> HttpResponse:
    """The form for the key's current version; 404 if the key is not live."""
    namespace, key = ctx["namespace"], ctx["key"]
    row = kv.kv_get(namespace=namespace, key=key) if key and namespace != LOCKS_NS else None
    if row is None:
        ctx["error"] = "This key is not live (or is a lock permit: use /locks/)."
        return render(request, form, ctx, status=404)
    ctx.update(expect=row.version, value_text=_pretty(row.value), row=_row(row), **more)
    return render(request, form, ctx)


@staff_action("kv.edit")
def edit(request: HtmxHttpRequest, namespace: str) -> HttpResponse:
    """GET: the edit form for the key's current version. POST: CAS put."""
    namespace = _namespace_or_404(namespace)
    source, form, ctx = _begin(request, namespace, "edit")
    key = ctx["key"]
    if request.method == "GET":
        return _ask(request, form, ctx, expiry="keep")
    ctx.update(
        expect=_version(source.get("expect", "")),
        value_text=source.get("value", ""),
        expiry=source.get("expiry", "keep"),
        reason=source.get("reason", ""),
    )

    def refuse(message: str) -> HttpResponse:
        ctx["error"] = message
        return render(request, form, ctx, status=422)

    try:
        value = json.loads(ctx["value_text"])
    except ValueError as exc:
        return refuse(f'The value is not JSON: {exc}. Strings need quotes: "text".')
    try:
        expiry = _expiry(ctx["expiry"])
    except ValueError as exc:
        return refuse(str(exc))
    if not key or ctx["expect"] < 1:
        return refuse("Name the key and the version you edit.")
    try:
        result = kv_operator_edit(
            namespace=namespace,
            key=key,
            value=value,
            expect=ctx["expect"],
            expiry=expiry,
            who=who_of(request),
        )
    except (KVBadRequest, KVPayloadTooLarge) as exc:
        return refuse(str(exc))
    return _outcome(request, namespace, ctx, result)


@staff_action("kv.delete")
def delete(request: HtmxHttpRequest, namespace: str) -> HttpResponse:
    """GET: the confirmation. POST: delete while at the version shown."""
    namespace = _namespace_or_404(namespace)
    source, form, ctx = _begin(request, namespace, "delete")
    key = ctx["key"]
    ctx["expect"] = _version(source.get("expect", ""))
    if request.method == "GET":
        return _ask(request, form, ctx)
    if not key or ctx["expect"] < 1:
        ctx["error"] = "Name the key and the version you delete."
        return render(request, form, ctx, status=422)
    try:
        result = kv_operator_delete(namespace=namespace, key=key, expect=ctx["expect"], who=who_of(request))
    except KVBadRequest as exc:
        ctx["error"] = str(exc)
        return render(request, form, ctx, status=422)
    return _outcome(request, namespace, ctx, result)


@staff_action("kv.edit")
def revert(request: HtmxHttpRequest, namespace: str) -> HttpResponse:
    """Put a key back to a version of its history, as a compare-and-set
    (``kv_history.revert_page``)."""
    return kv_history.revert_page(request, _namespace_or_404(namespace), KV_KEY)
