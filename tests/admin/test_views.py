"""The admin's writes in Django's own change and delete views: no private
views overridden, the domain's ``*_in_txn`` forms in a savepoint of the
view's transaction, the outcome kept beside the request, not on it."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.auth.models import User

from queenadmin.admin.domain_admin import DomainAdmin
from queenadmin.domain import kv
from queenadmin.domain.audit import Who
from queenadmin.errors import InvalidArgument
from queenadmin.models import AuditEntry, KVEntry

pytestmark = pytest.mark.django_db

LIST = "/admin/queenadmin/kventry/"


def test_no_admin_overrides_djangos_views():
    """Every model admin uses ModelAdmin's own change and delete views,
    which hold the transaction a POST runs in."""
    ours = [type(a) for a in admin.site._registry.values() if isinstance(a, DomainAdmin)]
    assert len(ours) >= 8
    for cls in ours:
        for klass in cls.__mro__[: cls.__mro__.index(ModelAdmin)]:
            for name in ("changeform_view", "_changeform_view", "delete_view", "_delete_view"):
                assert name not in vars(klass), (klass, name)


def test_a_refusal_after_the_domain_wrote_undoes_the_write(operator, monkeypatch):
    """The edit runs in a savepoint of the view's transaction: a refusal
    raised after the key was written rolls the write back, the page tells
    the refusal and the view's transaction goes on (the change is not
    logged as applied)."""
    kv.kv_put(namespace="config", key="flag", value=1, ttl=None)
    entry = KVEntry.objects.get(namespace="config", key="flag")

    def refuse(who, **kwargs):
        raise InvalidArgument("the audit refused")

    monkeypatch.setattr(Who, "record_in_txn", refuse)
    form = {
        "value": json.dumps(2),
        "expiry": "keep",
        "ttl_seconds": "",
        "seen_version": str(entry.version),
        "reason": "r",
        "_save": "Save",
    }
    response = operator.post(f"{LIST}{entry.pk}/change/", form, follow=True)
    assert "The audit refused" in response.content.decode()
    row = kv.kv_get(namespace="config", key="flag")
    assert row is not None
    assert (row.value, row.version) == (1, entry.version)
    assert not AuditEntry.objects.exists()
    # The outcome is kept beside the request, never as an attribute on it.
    assert not [name for name in vars(response.wsgi_request) if name.startswith("_admin")]


def test_djangos_bulk_delete_is_never_offered(operator, rf):
    """Rows are deleted only through the domain: Django's bulk delete
    (which would remove them behind its back) is in no admin's actions."""
    request = rf.get("/admin/")
    request.user = User.objects.get(username="otto")
    for model_admin in admin.site._registry.values():
        if isinstance(model_admin, DomainAdmin):
            assert "delete_selected" not in model_admin.get_actions(request), type(model_admin)
