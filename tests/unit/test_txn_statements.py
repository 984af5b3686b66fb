"""What a guarded transaction (a lock's permit check, one push, one KV put) costs in statements.

bench/transactions.py's bundle, in process. PostgreSQL: the queue and
partition found and locked, the message written (with dedup and NOTIFY),
the KV keys locked and read, the put stamped and written (its history row
in the same statement): 4 statements besides BEGIN and COMMIT (11 before
issue 15). SQLite: 8, and a ninth for the key's history row (issue 41),
which SQLite cannot write from the upsert's statement; a namespace that
keeps no history costs the 8 of before.
"""

from __future__ import annotations

import pytest

from queenadmin.domain import kv, locks, queues
from queenadmin.domain.transactions import TxnBundle, TxnPush, txn_commit
from queenadmin.plumbing import db
from tests.unit.test_push_statements import counted

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("excluded", "sqlite_statements"), [("", 9), ("state", 8)])
def test_a_guarded_push_and_put_costs_few_statements(settings, excluded, sqlite_statements) -> None:
    settings.QUEENADMIN_KV_HISTORY_EXCLUDE = excluded
    queues.queue_push(items=[queues.PushItem("q", "p", db.json_text({"n": 0}), "t-0")])
    kv.kv_call([kv.KVPut("state", "k", db.json_text(0), None)])
    with locks.hold("worker", ttl=60) as lock:
        bundle = TxnBundle(
            pushes=(TxnPush(0, queues.PushItem("q", "p", db.json_text({"n": 1}), "t-1")),),
            kv=(kv.KVPut("state", "k", db.json_text(1), None),),
        )
        with counted() as seen:
            outcome = txn_commit(bundle=bundle, guard=lock)
    assert outcome.success, outcome
    assert len(seen) <= (4 if db.is_postgres() else sqlite_statements), "\n".join(seen)
