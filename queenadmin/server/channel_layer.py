"""The Redis channel layer's configuration (``CHANNEL_LAYERS`` with ``REDIS_URL``)."""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer

#: channels_redis waits for a message with a BZPOPMIN that Redis holds open
#: for ``brpop_timeout`` (5 s). redis-py 8 gives each read 5 s unless told
#: otherwise, so an idle ``receive()`` raced Redis's own 5 s and, on a busy
#: host, lost: ``redis.exceptions.TimeoutError``, and a dashboard's socket
#: closed (channels_redis issue 422). A read may take three blocks; a Redis
#: gone silent still fails a read, 15 s on, rather than hanging it.
READ_TIMEOUT = 3 * RedisChannelLayer.brpop_timeout
CONNECT_TIMEOUT = 5


def redis_layer_config(url: str, **config: Any) -> dict[str, Any]:
    """``CONFIG`` of a ``RedisChannelLayer`` on ``url`` (``config``: its other keys)."""
    host = {"address": url, "socket_timeout": READ_TIMEOUT, "socket_connect_timeout": CONNECT_TIMEOUT}
    return {"hosts": [host], **config}
