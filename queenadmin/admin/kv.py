"""KV entries in the admin: edit and delete as a compare-and-set on the version.

Lock permits (``queen-locks``) are listed as locks with owner and fencing
token masked; they change only by a force release (``domain/locks``).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from queenadmin.admin.domain_admin import Confirmed, DomainAdmin, DomainForm, each, parse_json, prefix_search, require
from queenadmin.domain import kv, locks
from queenadmin.domain.clock import now as clock_now
from queenadmin.domain.kv import operator as kv_operator
from queenadmin.domain.locks import operator as lock_operator
from queenadmin.domain.masking import mask_token
from queenadmin.models import KVEntry, VersionCounter
from queenadmin.plumbing import db

LOCKS = kv.LOCKS_NAMESPACE
PREVIEW_CHARS = 80
#: Namespaces offered by the filter and searched by a key prefix.
NAMESPACES_LISTED = 200


def _row(entry: KVEntry) -> kv.KVRow:
    return kv.KVRow(
        entry.namespace,
        entry.key,
        json.loads(entry.value_json),
        entry.version,
        entry.expires_at,
        entry.created_at,
        entry.updated_at,
    )


def lock_summary(entry: KVEntry) -> str:
    """A lock permit as the admin shows it: who holds it, masked."""
    value = json.loads(entry.value_json)
    owner, caller = locks.owner_of(value), locks.caller_of(value)
    taken = f", taken by {caller}" if caller is not None else ""
    return f"lock permit held by owner {mask_token(owner) or '(none)'}{taken}, token {mask_token(entry.version)}"


def _seen_version(request: HttpRequest, entry: KVEntry) -> int:
    """The version the delete page showed (the CAS aims at it)."""
    seen = request.POST.get("seen_version", "")
    return int(seen) if seen.isdigit() else entry.version


class NamespaceFilter(admin.SimpleListFilter):
    title = "namespace"
    parameter_name = "namespace"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = db.distinct_leading(KVEntry, "namespace", limit=NAMESPACES_LISTED)
        return [(n, f"{n} (locks)" if n == LOCKS else n) for n in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[KVEntry]) -> QuerySet[KVEntry]:
        value = self.value()
        return queryset.filter(namespace=value) if value else queryset


class VersionFilter(admin.SimpleListFilter):
    """Recently written keys: versions come from one store-wide counter."""

    title = "version"
    parameter_name = "written"
    SPANS = {"100": 100, "1000": 1_000, "10000": 10_000}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(k, f"among the last {v:,} writes") for k, v in self.SPANS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[KVEntry]) -> QuerySet[KVEntry]:
        span = self.SPANS.get(self.value() or "")
        if span is None:
            return queryset
        top = VersionCounter.objects.values_list("value", flat=True).first() or 0
        return queryset.filter(version__gt=top - span)


class ExpiryFilter(admin.SimpleListFilter):
    title = "expiry"
    parameter_name = "expiry"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("hour", "expires within an hour"),
            ("later", "expires later"),
            ("never", "never expires"),
            ("expired", "expired, not yet swept"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[KVEntry]) -> QuerySet[KVEntry]:
        now = clock_now()
        match self.value():
            case "hour":
                return queryset.filter(expires_at__gt=now, expires_at__lte=now + timedelta(hours=1))
            case "later":
                return queryset.filter(expires_at__gt=now + timedelta(hours=1))
            case "never":
                return queryset.filter(expires_at__isnull=True)
            case "expired":
                return queryset.filter(expires_at__lte=now)
        return queryset


EXPIRY_CHOICES = [("keep", "keep the current expiry"), ("forever", "never expire"), ("ttl", "expire in (seconds)")]


class KVEditForm(DomainForm):
    value = forms.CharField(widget=forms.Textarea(attrs={"rows": 6, "cols": 80}), help_text="JSON")
    expiry = forms.ChoiceField(choices=EXPIRY_CHOICES, initial="keep")
    ttl_seconds = forms.IntegerField(required=False, min_value=1, label="TTL (seconds)")
    #: The version the operator saw: the edit is a compare-and-set on it.
    seen_version = forms.IntegerField(widget=forms.HiddenInput)

    class Meta(DomainForm.Meta):
        model = KVEntry

    def show(self, row: KVEntry) -> None:
        self.fields["value"].initial = json.dumps(json.loads(row.value_json), indent=2)
        self.fields["seen_version"].initial = row.version

    def clean_value(self) -> Any:
        return parse_json(self.cleaned_data["value"])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("expiry") == "ttl" and not data.get("ttl_seconds"):
            self.add_error("ttl_seconds", "give the TTL in seconds")
        return data


@admin.register(KVEntry)
class KVEntryAdmin(DomainAdmin):
    form = KVEditForm
    list_display = ("namespace", "key", "shown_value", "shown_version", "expires_at", "updated_at")
    list_filter = (NamespaceFilter, ExpiryFilter, VersionFilter)
    search_fields = ("key",)
    search_help_text = "Keys starting with the text (in every namespace, or the one filtered)."
    ordering = ("namespace", "key")
    readonly_fields = ("namespace", "key", "shown_version", "shown_value", "expires_at", "created_at", "updated_at")
    fields = (
        "namespace",
        "key",
        "shown_version",
        "expires_at",
        "updated_at",
        "value",
        "expiry",
        "ttl_seconds",
        "seen_version",
        "reason",
    )
    actions = ("delete_selected_keys", "force_release")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[KVEntry], search_term: str
    ) -> tuple[QuerySet[KVEntry], bool]:
        names = db.distinct_leading(KVEntry, "namespace", limit=NAMESPACES_LISTED)
        return prefix_search(queryset, search_term, leading="namespace", key="key", values=names)

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        # An expiry filter reads the expires_at index in its own order.
        if request.GET.get("expiry") in ("hour", "later", "expired"):
            return ("expires_at", "id")
        return ("namespace", "key")

    # -- Columns ---------------------------------------------------------

    @admin.display(description="value")
    def shown_value(self, entry: KVEntry) -> str:
        if entry.namespace == LOCKS:
            return lock_summary(entry)
        text = entry.value_json
        return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"

    @admin.display(description="version", ordering="version")
    def shown_version(self, entry: KVEntry) -> str:
        # A permit's version is its fencing token: a credential.
        return str(mask_token(entry.version)) if entry.namespace == LOCKS else str(entry.version)

    # -- Permissions -----------------------------------------------------

    def has_change_permission(self, request: HttpRequest, obj: KVEntry | None = None) -> bool:
        if obj is not None and obj.namespace == LOCKS:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: KVEntry | None = None) -> bool:
        if obj is not None and obj.namespace == LOCKS:
            return False
        return super().has_delete_permission(request, obj)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None or not self.has_change_permission(request, obj):
            return ("namespace", "key", "shown_version", "shown_value", "expires_at", "created_at", "updated_at")
        return self.fields

    # -- Writes, through domain/kv/operator.py ----------------------------

    def save_model(self, request: HttpRequest, obj: KVEntry, form: Any, change: bool) -> None:
        data = form.cleaned_data
        expiry: kv_operator.Expiry
        if data["expiry"] == "ttl":
            expiry = timedelta(seconds=data["ttl_seconds"])
        else:
            expiry = data["expiry"]
        result = self.in_view(
            request,
            lambda: kv_operator.kv_operator_edit_in_txn(
                namespace=obj.namespace,
                key=obj.key,
                value=data["value"],
                expect=data["seen_version"],
                expiry=expiry,
                who=self.who(request, data["reason"]),
            ),
        )
        if result is not None and not result.applied:
            self.view_write(request).refused = (
                f"Not saved: the key moved to version {result.current_version} since you opened it"
                f" (now {json.dumps(result.current_value)[:200]}). Review and save again."
                if result.current_version
                else "Not saved: the key was deleted since you opened it."
            )

    def delete_model(self, request: HttpRequest, obj: KVEntry) -> None:
        require(request, "delete_kventry")
        result = self.in_view(
            request,
            lambda: kv_operator.kv_operator_delete_in_txn(
                namespace=obj.namespace,
                key=obj.key,
                expect=_seen_version(request, obj),
                who=self.who(request, request.POST.get("reason", "")),
            ),
        )
        if result is not None and not result.applied:
            self.view_write(request).refused = "Not deleted: the key moved since you opened it."

    @admin.action(description="Delete the selected keys (compare-and-set)", permissions=["delete"])
    def delete_selected_keys(self, request: HttpRequest, queryset: QuerySet[KVEntry]) -> TemplateResponse | None:
        def delete(entry: KVEntry, page: Confirmed) -> str | None:
            if entry.namespace == LOCKS:
                return "lock permits (force release them)"
            key, expect = entry.key, entry.version
            result = kv_operator.kv_operator_delete(namespace=entry.namespace, key=key, expect=expect, who=page.who)
            return None if result.applied else "moved since"

        return self.each_confirmed(
            request,
            queryset,
            delete,
            done="Deleted",
            perm="delete_kventry",
            title="Delete keys",
            warning="Each key is deleted only at the version listed now; lock permits are left alone.",
        )

    @admin.action(description="Force release the selected lock permits", permissions=["change"])
    def force_release(self, request: HttpRequest, queryset: QuerySet[KVEntry]) -> TemplateResponse | None:
        permits = queryset.filter(namespace=LOCKS)
        warning = "The holders' tokens die: their next renew answers lost."
        page = self.confirmed(request, permits, perm="change_kventry", title="Force release", warning=warning)
        if isinstance(page, TemplateResponse):
            return page

        def release(entry: KVEntry) -> str | None:
            name, sep, tail = entry.key.rpartition("#")
            if not sep or not tail.isdigit():
                return "not a permit"
            row = _row(entry)
            mark = lock_operator.lease_mark(owner=locks.owner_of(row.value), since=locks.since_of(row))
            result = lock_operator.lock_force_release(name=name, slot=int(tail), lease=mark, who=page.who)
            return None if result.released else str(result.reason)

        tally = each(permits, release)
        skipped = queryset.exclude(namespace=LOCKS).count()
        if skipped:
            tally.skipped["not lock permits"] = skipped
        tally.report(self, request, "Released")
        return None
