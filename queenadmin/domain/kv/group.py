"""Group commit of lone writes: concurrent callers share one statement.

A serving process runs requests on a few threads (``server/wsgi_bridge``),
each with its own connection. When several of them make a lone write that
has a one-statement form (``planner.fast_path_of``: put, create, cas,
delete) at the same moment, one of them writes them all in one statement,
so one commit, through ``Store.write_group``; each caller then gets its
own answer, as if it had run its own statement.

The leader-follower pattern: a caller that finds no write in flight runs
its own at once, alone, with the one-statement form it would use anyway (a
lone call never waits for company). Callers that arrive while a write is
in flight queue; when it ends, the first of them leads the next group,
made of everything queued by then, and each member is answered only after
that statement returned, so after its commit. An answer is therefore never
given for a write that can still be lost.

Two writes of one key never share a group: the later stays queued for the
next, so same-key writes run one after another in arrival order and their
versions rise in that order, as if each had run alone. A write whose key is
in the statement in flight, or that has waited ``PATIENCE_SECONDS`` for it,
runs alone at once instead, beside the group: the keys' advisory locks
order it as they order the writes of other processes.

If the group's statement fails, every member gets the error (a failed
statement rolls back all of it; after a lost connection whether it
committed is unknown, as for a lone call): nothing is retried here.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from queenadmin.domain.kv.ops import KVDelete, KVPut
from queenadmin.domain.kv.planner import FastPath
from queenadmin.domain.kv.store.base import GroupItem, Store, Written

#: The most writes in one statement; more stay queued for the next.
MAX_GROUP = 128
#: How long a queued write waits for the group in flight to end before it
#: writes alone: a group may wait for a key lock that a guarded step holds,
#: and writes of other keys must not all wait with it.
PATIENCE_SECONDS = 0.05


class _Waiter:
    __slots__ = ("error", "ident", "item", "lead", "outcome", "ready")

    def __init__(self, item: GroupItem) -> None:
        self.item = item
        self.ident = (item[1].namespace, item[1].key)
        #: Made only when the caller queues: a leader never waits.
        self.ready: threading.Event | None = None
        #: Set (before ``ready``) when this caller is to lead the next group.
        self.lead = False
        self.outcome: Written | None = None
        self.error: BaseException | None = None


class Combiner:
    """One process's queue of lone writes; ``write`` is the entry point.

    ``run_one`` writes a group of one, ``run_many`` a group of several
    (distinct keys); both run on the leading caller's thread, so on its
    database connection, outside any transaction.
    """

    def __init__(
        self,
        run_one: Callable[[GroupItem], Written | None],
        run_many: Callable[[Sequence[GroupItem]], list[Written | None]],
    ) -> None:
        self._run_one = run_one
        self._run_many = run_many
        self._reset()

    def _reset(self) -> None:
        self._mutex = threading.Lock()
        self._queue: list[_Waiter] = []
        #: A group is in flight (its leader has not handed over yet).
        self._busy = False
        #: The keys of the group in flight.
        self._flying: frozenset[tuple[str, str]] = frozenset()

    def write(self, item: GroupItem) -> Written | None:
        """Write ``item`` alone or in a group; what its one-statement form answers."""
        me = _Waiter(item)
        alone = False
        with self._mutex:
            if not self._busy:
                self._busy = True
                me.lead = True
            elif me.ident in self._flying:
                # Its key is in the statement in flight, which may be waiting
                # for that key's lock (a guarded step holds it): queue for the
                # key in PostgreSQL, in order, as a lone call does.
                alone = True
            else:
                me.ready = threading.Event()
                self._queue.append(me)
        if alone:
            return self._run_one(item)
        if me.ready is not None and not me.ready.wait(PATIENCE_SECONDS):
            with self._mutex:
                alone = not me.lead and me in self._queue
                if alone:
                    self._queue.remove(me)
            if alone:
                # The group in flight is stuck (a key lock held elsewhere):
                # no write of another key waits for it longer than this.
                return self._run_one(item)
            me.ready.wait()
        if me.lead:
            self._lead(me)
        if me.error is not None:
            raise me.error
        return me.outcome

    def _take(self, leader: _Waiter) -> list[_Waiter]:
        """The next group: the leader, then the queued in order, one per key."""
        group = [leader]
        keys = {leader.ident}
        rest: list[_Waiter] = []
        for waiter in self._queue:
            if waiter is leader:
                continue
            if waiter.ident in keys or len(group) >= MAX_GROUP:
                rest.append(waiter)
            else:
                group.append(waiter)
                keys.add(waiter.ident)
        self._queue = rest
        return group

    def _lead(self, me: _Waiter) -> None:
        with self._mutex:
            group = self._take(me)
            self._flying = frozenset(waiter.ident for waiter in group)
        try:
            if len(group) == 1:
                me.outcome = self._run_one(me.item)
            else:
                for waiter, outcome in zip(group, self._run_many([w.item for w in group]), strict=True):
                    waiter.outcome = outcome
        except BaseException as exc:
            me.error = exc
            for waiter in group[1:]:
                waiter.error = _copy_of(exc)
        finally:
            with self._mutex:
                nxt = self._queue[0] if self._queue else None
                self._flying = frozenset()
                if nxt is None:
                    self._busy = False
                else:
                    nxt.lead = True
            for waiter in group[1:]:
                assert waiter.ready is not None
                waiter.ready.set()
            if nxt is not None:
                assert nxt.ready is not None
                nxt.ready.set()


def _copy_of(exc: BaseException) -> BaseException:
    """``exc`` for another thread to raise: its own traceback, the same cause."""
    try:
        clone = copy.copy(exc)
    except Exception:
        return exc
    clone.__cause__ = exc.__cause__
    return clone


def _one(the_store: Store, item: GroupItem) -> Written | None:
    kind, op, now, by = item
    if kind == "delete":
        assert isinstance(op, KVDelete)
        return the_store.delete_fast(op, now, by)
    assert isinstance(op, KVPut)
    if kind == "put":
        return the_store.put_fast(op, now, by), op.value_json
    version = (the_store.create_fast if kind == "create" else the_store.cas_fast)(op, now, by)
    return None if version is None else (version, op.value_json)


_combiners: dict[int, Combiner] = {}


def combiner_of(the_store: Store) -> Combiner:
    """The process's combiner of ``the_store`` (a store that has ``write_group``)."""
    found = _combiners.get(id(the_store))
    if found is None:
        found = _combiners.setdefault(
            id(the_store), Combiner(lambda item: _one(the_store, item), lambda items: the_store.write_group(items))
        )
    return found


def write(
    the_store: Store, kind: FastPath, op: KVPut | KVDelete, now: datetime, by: str | None = None
) -> Written | None:
    """A lone write through the process's group commit (see the module);
    ``by`` is who wrote, for the key's history."""
    return combiner_of(the_store).write((kind, op, now, by))


def _forget_in_child() -> None:
    # A forked child has none of the parent's threads: a group in flight
    # there would never hand over.
    for found in _combiners.values():
        found._reset()


os.register_at_fork(after_in_child=_forget_in_child)
