"""Full-size read timing (issue 41): a key with 100,000 versions and a lock
with 100,000 events, their dashboard pages and history routes.

Run on demand against a migrated PostgreSQL database of your own (it writes
namespace ``hot`` and lock ``big`` there, and a superuser ``h41-bench``)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/scratch .venv/bin/python manage.py migrate
    PYTHONPATH=. DATABASE_URL=postgresql://postgres@127.0.0.1:5432/scratch .venv/bin/python bench/history_scale.py

The rows are inserted by SQL in the shape every write keeps (100,000 writes
through the API take minutes on a shared machine); the reads are the
product's. CI runs the same reads at a small size and checks their plan
(``tests/dashboard_ops/test_history_scale.py``).
"""

from __future__ import annotations

import os
import statistics
import time

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from queenadmin.domain import kv, tokens

    N = 100_000
    with connection.cursor() as c:
        c.execute(
            "DELETE FROM queenadmin_kvversion WHERE (namespace = 'hot' AND key = 'k') OR (namespace = 'queen-locks' AND key = 'big#0')"
        )
        c.execute("DELETE FROM queenadmin_kventry WHERE namespace = 'hot'")
        c.execute(
            "SELECT setval('queenadmin_kv_version', greatest((SELECT last_value FROM queenadmin_kv_version), 1000))"
        )
        c.execute(
            """INSERT INTO queenadmin_kvversion (namespace, key, version, op, value_json, digest, size, at, actor, expires_at)
                     SELECT 'hot', 'k', nextval('queenadmin_kv_version'), 'put', '{"n":' || i || '}', NULL, 10,
                            now() - interval '1 second' * (%s - i), 'bench', NULL FROM generate_series(1, %s) AS i""",
            [N, N],
        )
        c.execute(
            """INSERT INTO queenadmin_kvversion (namespace, key, version, op, value_json, digest, size, at, actor, expires_at)
                     SELECT 'queen-locks', 'big#0', nextval('queenadmin_kv_version'),
                            CASE WHEN i %% 2 = 0 THEN 'delete' ELSE 'put' END,
                            CASE WHEN i %% 2 = 0 THEN NULL ELSE '{"caller":"bench"}' END, NULL, 0,
                            now() - interval '1 second' * (%s - i), 'bench',
                            CASE WHEN i %% 2 = 0 THEN NULL ELSE now() - interval '1 second' * (%s - i) + interval '30 seconds' END
                     FROM generate_series(1, %s) AS i""",
            [N, N, N],
        )
        c.execute("VACUUM ANALYZE queenadmin_kvversion")
    kv.kv_put(namespace="hot", key="k", value={"n": N}, ttl=None)
    user, _ = User.objects.get_or_create(username="h41-bench", defaults={"is_staff": True, "is_superuser": True})
    user.is_staff = user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    token = tokens.token_create(by=tokens.HOST, name=f"h41-bench-{time.time_ns()}", scope="read")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    page = kv.kv_history(namespace="hot", key="k", limit=50)
    for name, c2, path in [
        ("key page", client, "/kv/hot/key/k"),
        ("key page, older", client, f"/kv/hot/key/k?before={page.next_before - 50000}"),
        ("key page, value at a time", client, "/kv/hot/key/k?at=2000-01-01T00:00"),
        ("key history API", api, "/api/v1/history/kv/hot/k"),
        ("lock page", client, "/locks/?name=big"),
        ("lock history API", api, "/api/v1/history/locks/big"),
    ]:
        times = []
        for _ in range(7):
            t = time.perf_counter()
            r = c2.get(path)
            times.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, (path, r.status_code, r.content[:300])
        print(
            f"{name}: median {statistics.median(times):.1f} ms, best {min(times):.1f} ms, runs {[round(x) for x in times]}"
        )
    os.system("uptime")


if __name__ == "__main__":
    main()
