"""The dashboard's websocket: one consumer for every live page.

``/ws/<page>/?<query>`` joins the event groups of the page's regions
(``pages.PAGES[page]``), sends every region at once (a reconnect resyncs),
then re-renders the regions an event made stale, coalesced to one render
per ``DASHBOARD_LIVE_GAP_SECONDS`` per socket whatever the event rate.

Only staff with the page's view permission connect, and every render
checks the session (logout, expiry, a second factor owed under
``QUEENADMIN_REQUIRE_2FA``). A refused socket is accepted and closed with
its code (4401 signed out, 4403 no permission, 4404 no such page, 4400 a
query string no page sends: ``live.socket_query``), because htmx's ws
extension retries a refused handshake forever but stops on these.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.sessions.backends.base import SessionBase
from django.http import QueryDict

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import live, pages
from queenadmin.dashboard.permissions import may_view
from queenadmin.dashboard.sessions import session_group
from queenadmin.dashboard.twofactor import socket_unverified
from queenadmin.domain import clock

log = logging.getLogger(__name__)


def _layer_unreachable(exc: Exception) -> bool:
    """Whether ``exc`` says the channel layer cannot be reached.

    redis-py is imported only by the Redis layer (channels_redis): a
    process on the in-memory layer (SQLite, one process) never loads it,
    about 0.1 s of each start, and no RedisError can come from there.
    """
    if isinstance(exc, OSError):
        return True
    errors = sys.modules.get("redis.exceptions")
    return errors is not None and isinstance(exc, errors.RedisError)


#: Close codes (RFC 6455 leaves 4000-4999 to applications).
CLOSE_UNKNOWN_PAGE = 4404
CLOSE_FORBIDDEN = 4403
CLOSE_SIGNED_OUT = 4401
CLOSE_BAD_REQUEST = 4400
#: Seconds ahead beyond which a page's own expiry is not waited for.
MAX_REFRESH_DELAY = 6 * 3600.0


def _session_alive(session: SessionBase | None) -> bool:
    if session is None or session.session_key is None:
        return False
    return bool(session.exists(session.session_key))


class DashboardConsumer(AsyncWebsocketConsumer):
    page: live.LivePage
    params: QueryDict

    async def connect(self) -> None:
        self.dirty: set[str] = set()
        self.flusher: asyncio.Task[None] | None = None
        self.last_render = 0.0
        self.joined: list[str] = []
        self.refresher: asyncio.TimerHandle | None = None
        name = self.scope["url_route"]["kwargs"]["page"]
        page = pages.PAGES.get(name)
        if page is None:
            await self._refuse(CLOSE_UNKNOWN_PAGE)
            return
        self.page = page
        self.user = self.scope.get("user")
        if self.user is None or not await database_sync_to_async(may_view)(self.user, page.permission):
            await self._refuse(
                CLOSE_SIGNED_OUT if not getattr(self.user, "is_authenticated", False) else CLOSE_FORBIDDEN
            )
            return
        if await database_sync_to_async(socket_unverified)(self.user, self.scope.get("session")):
            await self._refuse(CLOSE_SIGNED_OUT)
            return
        try:
            self.params = live.socket_params(self.scope.get("query_string", b""))
        except ValueError:
            await self._refuse(CLOSE_BAD_REQUEST)
            return
        session = self.scope.get("session")
        groups = sorted(page.groups)
        if session is not None and session.session_key:
            groups.insert(0, session_group(session.session_key))
        # Join before accepting: with the channel layer (Redis) unreachable
        # the handshake then fails and the browser keeps retrying with its
        # backoff, its badge going "stale" after a while. Accepted first,
        # every retry opened and closed at once, and the badge flickered
        # "live" for as long as Redis was down (tests/pooler/test_faults.py).
        try:
            for group in groups:
                await self.channel_layer.group_add(group, self.channel_name)
                self.joined.append(group)
        except Exception as exc:
            if not _layer_unreachable(exc):
                raise
            log.warning("dashboard socket refused: the channel layer is unreachable (%s)", exc)
            # Memberships already made expire with the layer's group expiry.
            self.joined = []
            await self.close()
            return
        await self.accept()
        self.dirty = {region.name for region in page.regions}
        await self._render()

    async def _refuse(self, code: int) -> None:
        # Accept, then close with the reason: a refused handshake reaches
        # the browser as 1006, which the htmx ws extension retries forever.
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        if self.refresher is not None:
            self.refresher.cancel()
        if self.flusher is not None:
            self.flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.flusher
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # The page sends nothing it needs answered; "resync" re-sends every
        # region (the badge's click after a long sleep).
        if text_data and "resync" in text_data:
            self.dirty = {region.name for region in self.page.regions}
            self._schedule()

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Every event group's message ("lock.changed", "kv.changed", ...)
        # lands here: no handler per type, only "which regions are stale".
        kind = message.get("type", "")
        if kind.startswith("websocket."):
            await super().dispatch(message)
            return
        if kind == "session.ended":
            await self.close(code=CLOSE_SIGNED_OUT)
            return
        group = kind.split(".", 1)[0]
        stale = self.page.stale_regions(_GROUP_OF_TYPE.get(group, group), message, self.params)
        if stale:
            self.dirty |= stale
            self._schedule()

    def _schedule(self) -> None:
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        gap = self.page.gap if self.page.gap is not None else app_settings.DASHBOARD_LIVE_GAP_SECONDS
        wait = self.last_render + gap - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        await self._render()

    async def _render(self) -> None:
        names, self.dirty = self.dirty, set()
        if not names:
            return
        self.last_render = asyncio.get_running_loop().time()
        rendered = await database_sync_to_async(self._render_sync)(names)
        if rendered is None:
            await self.close(code=CLOSE_SIGNED_OUT)
            return
        html, stale_at = rendered
        await self.send(text_data=html)
        self._refresh_at(stale_at)

    def _render_sync(self, names: set[str]) -> tuple[str, datetime | None] | None:
        session = self.scope.get("session")
        if not _session_alive(session) or not may_view(self.user, self.page.permission):
            return None
        if socket_unverified(self.user, session):
            return None
        return live.render_regions(self.page, self.user, self.params, names)

    def _refresh_at(self, stale_at: datetime | None) -> None:
        """Re-render every region when the page goes stale with no event
        (a lease or key expiring: expiry is lazy and publishes nothing)."""
        if self.refresher is not None:
            self.refresher.cancel()
            self.refresher = None
        if stale_at is None:
            return
        delay = (stale_at - clock.now()).total_seconds() + 0.05
        if delay > MAX_REFRESH_DELAY:
            return

        def stale() -> None:
            self.dirty = {region.name for region in self.page.regions}
            self._schedule()

        self.refresher = asyncio.get_running_loop().call_later(max(0.0, delay), stale)


#: An event type's first word -> its group, where they differ
#: ("lock.changed" is published to the "locks" group).
_GROUP_OF_TYPE = {"lock": "locks", "timer": "timers", "queue": "queues"}
