from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.urls import path, register_converter

from queenadmin.dashboard.links import NameConverter, TailNameConverter
from queenadmin.dashboard.views import (
    attention,
    audit,
    consumers,
    deadletters,
    ephemeral,
    kv,
    locks,
    login,
    messages,
    overview,
    pause,
    push,
    queues,
    recovery,
    search,
    settings,
    timers,
    tokens,
)

app_name = "dashboard"

# A stored name in a path: one segment spelled by ``links.segment``; a KV
# key may also span segments, as bookmarks from before the spelling did.
register_converter(NameConverter, "storedname")
register_converter(TailNameConverter, "storedpath")


@functools.cache
def _sso_class_view(name: str) -> Callable[..., HttpResponseBase]:
    from queenadmin.dashboard import sso

    return getattr(sso, name).as_view()  # type: ignore[no-any-return]


def _sso_view(name: str) -> Callable[..., HttpResponseBase]:
    """Single sign-on's view ``name``, imported at its first request:
    mozilla-django-oidc and what it brings raised a worker's memory by about
    26 MiB (tests/api/test_memory.py), which a deployment that never signs in
    through a provider should not pay."""

    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return _sso_class_view(name)(request, *args, **kwargs)

    return view


urlpatterns = [
    path("", overview.overview, name="overview"),
    path("login/", login.LoginView.as_view(), name="login"),
    path("login/code/", login.login_code, name="login_code"),
    path("login/sso/", _sso_view("SsoBegin"), name="sso_begin"),
    path("login/sso/callback/", _sso_view("SsoCallback"), name="sso_callback"),
    path("account/two-factor/", login.two_factor, name="two_factor"),
    path("locks/", locks.locks, name="locks"),
    path("locks/release/", locks.lock_release, name="lock_release"),
    path("timers/", timers.timers_page, name="timers"),
    path("timers/cancel/", timers.timer_cancel, name="timer_cancel"),
    path("timers/move/", timers.timer_move, name="timer_move"),
    path("timers/fire/", timers.timer_fire, name="timer_fire"),
    path("timers/bulk/cancel/", timers.timers_bulk_cancel_view, name="timers_bulk_cancel"),
    path("timers/bulk/move/", timers.timers_bulk_move_view, name="timers_bulk_move"),
    path("kv/", kv.namespaces, name="kv"),
    path("kv/<storedname:namespace>/", kv.keys, name="kv_keys"),
    path("kv/<storedname:namespace>/edit/", kv.edit, name="kv_edit"),
    path("kv/<storedname:namespace>/delete/", kv.delete, name="kv_delete"),
    path("kv/<storedname:namespace>/revert/", kv.revert, name="kv_revert"),
    path("kv/<storedname:namespace>/key/<storedpath:key>", kv.key_detail, name="kv_key"),
    path("audit/", audit.audit, name="audit"),
    path("audit/<int:entry_id>/revert/", audit.revert, name="audit_revert"),
    path("logout/", login.LogoutView.as_view(), name="logout"),
    path("queues/", queues.queue_list, name="queues"),
    # "~new" spells no name (a lone "~" escapes nothing: links.name_of), so
    # no queue's page is ever this one, not even a queue named "new".
    path("queues/~new/", settings.queue_create, name="queue_create"),
    path("queues/<storedname:name>/dlq/replay/", queues.dlq_replay, name="dlq_replay"),
    path("queues/<storedname:name>/dlq/purge/", queues.dlq_purge, name="dlq_purge"),
    path("queues/<storedname:name>/leases/", messages.queue_leases, name="queue_leases"),
    path("queues/<storedname:name>/messages/<storedname:message_id>/", messages.queue_message, name="queue_message"),
    path("queues/<storedname:name>/groups/recover/", recovery.group_recover, name="queue_group_recover"),
    path("queues/<storedname:name>/purge/", recovery.queue_purge, name="queue_purge"),
    path("queues/<storedname:name>/pause/", pause.queue_pause, name="queue_pause"),
    path("queues/<storedname:name>/settings/", settings.queue_settings_edit, name="queue_settings"),
    path("queues/<storedname:name>/push/", push.queue_push, name="queue_push"),
    path("queues/<storedname:name>/", queues.queue_detail, name="queue"),
    path("dlq/", deadletters.dlq_page, name="dlq"),
    path("ephemeral/", ephemeral.ephemeral_page, name="ephemeral"),
    path("dlq/replay/", deadletters.dlq_replay_any, name="dlq_replay_any"),
    path("dlq/purge/", deadletters.dlq_purge_any, name="dlq_purge_any"),
    path("consumers/", consumers.consumers_page, name="consumers"),
    path("attention/thresholds/", attention.thresholds, name="attention_thresholds"),
    path("search/", search.search_page, name="search"),
    path("tokens/", tokens.tokens_page, name="tokens"),
]
