"""Schemathesis hooks for tests/api/test_schemathesis*.py (``SCHEMATHESIS_HOOKS``).

Rules of the wire that no JSON Schema keyword can carry, so the
generated requests are made to keep them; each is in the document's
descriptions and has its own API tests.

1. Rules across the items of one call (protocol 2.12, 3.4, 4.2): a budget
of keys (KV ``getMany`` counts its keys, ``getPrefix`` its limit; a locks
``get`` 1000, an ``acquire`` its limit) and no key written, lock named or
timer given twice. A request that breaks one is a valid document but a
refused call; positive cases that do are not sent.

2. Not a rule either: a pop may wait up to 60 s (``wait=true``,
``timeout``; an ephemeral pop 300 s), longer than the run waits for an
answer: the generated pops wait ``POP_WAIT_MS`` at most (``_short_wait``),
a valid timeout as any other.
"""

from __future__ import annotations

from typing import Any

import schemathesis

#: The longest a generated long-poll waits (ms): a client may ask up to 60 s,
#: which the run cannot spend on each pop.
POP_WAIT_MS = 50


def _short_wait(query: dict[str, Any]) -> None:
    """A pop's ``timeout`` at most ``POP_WAIT_MS`` (a valid value stays valid)."""
    timeout = query.get("timeout") or POP_WAIT_MS  # empty: the default, 30 s
    if isinstance(timeout, int) or (isinstance(timeout, str) and timeout.lstrip("-").isdigit()):
        query["timeout"] = min(int(timeout), POP_WAIT_MS)


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    if "/pop" in case.operation.path and isinstance(case.query, dict):
        _short_wait(case.query)
    return case


#: queenadmin.conf KV_MAX_KEYS_PER_CALL, domain.kv.TXN_MAX_KEYS, domain.locks.MAX_KEYS and GET_KEYS.
KV_KEYS, TXN_KV_KEYS, LOCK_KEYS, LOCK_GET_KEYS = 1024, 256, 4096, 1000
KV_WRITES = ("put", "putIfAbsent", "delete", "incr", "check")


def _ops(body: Any) -> list[Any]:
    ops = body.get("operations") if isinstance(body, dict) else body
    return [op for op in ops if isinstance(op, dict)] if isinstance(ops, list) else []


def _unique(keys: list[Any]) -> bool:
    return len(keys) == len(set(keys))


def _kv_keeps_rules(ops: list[Any], budget: int) -> bool:
    def keys(op: dict[str, Any]) -> int:
        if op.get("op") == "getMany":
            return len(op.get("keys") or ())
        if op.get("op") == "getPrefix":
            limit = op.get("limit")
            return 100 if limit is None else max(1, min(1000, int(limit)))
        return 1

    written = [(op.get("ns"), op.get("key")) for op in ops if op.get("op") in KV_WRITES]
    return sum(keys(op) for op in ops) <= budget and _unique(written)


def _locks_keep_rules(ops: list[Any]) -> bool:
    def keys(op: dict[str, Any]) -> int:
        if op.get("op") == "get":
            return LOCK_GET_KEYS
        return (op.get("limit") or 1) if op.get("op") == "acquire" else 1

    return sum(keys(op) for op in ops) <= LOCK_KEYS and _unique([op.get("name") for op in ops])


def _timers_keep_rules(ops: list[Any]) -> bool:
    return _unique([(op.get("queue"), op.get("timerKey")) for op in ops])


def keeps_call_rules(path: str, body: Any) -> bool:
    """Whether ``body`` keeps the rules across a call's items (always, for other routes)."""
    if path.endswith("/kv"):
        return _kv_keeps_rules(_ops(body), KV_KEYS)
    if path.endswith("/locks"):
        return _locks_keep_rules(_ops(body))
    if path.endswith("/timers"):
        return _timers_keep_rules(_ops(body))
    if path.endswith("/transaction") and isinstance(body, dict):
        kv, timers = body.get("kv"), body.get("timers")
        return _kv_keeps_rules(_ops(kv), TXN_KV_KEYS) and _timers_keep_rules(_ops(timers))
    return True


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    if case.meta is None or case.meta.generation.mode.is_negative:
        return True
    return keeps_call_rules(case.operation.path, case.body)
