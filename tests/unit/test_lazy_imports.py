"""What a worker does not load until it is used.

mozilla-django-oidc (and requests, which it brings) raised a worker's
memory by about 26 MiB, paid by every deployment; it is imported by the
single sign-on views at their first request (dashboard/urls.py) and by a
logout, not by the URLconf the API's requests load. redis-py is loaded by
the Redis channel layer alone, not by a process on the in-memory one.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns
print(",".join(sorted(m for m in sys.modules if m.startswith("mozilla_django_oidc"))))
"""


def test_the_urlconf_loads_no_single_sign_on_library():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", done.stdout


#: What serve loads before its first request: the settings, the URLconf and
#: the ASGI application with the dashboard's websocket consumer.
SERVE_PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns
import queenadmin.server.app, queenadmin.dashboard.consumers
print(",".join(sorted(m for m in sys.modules if m == "redis" or m.startswith("redis."))))
"""


def test_a_process_on_the_in_memory_layer_loads_no_redis_client():
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    done = subprocess.run(
        [sys.executable, "-c", SERVE_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "", done.stdout


def test_the_socket_refuses_on_what_says_the_layer_is_unreachable_and_nothing_else():
    from redis.exceptions import ConnectionError as RedisConnectionError

    from queenadmin.dashboard.consumers import _layer_unreachable

    assert _layer_unreachable(ConnectionRefusedError(111, "refused"))
    assert _layer_unreachable(RedisConnectionError("Error 111 connecting to 127.0.0.1:6379"))
    assert not _layer_unreachable(ValueError("a bug"))
