"""Which queue a partition, a lease or a dead letter belongs to: what a
token's grants are checked against.

Reads only; a partition (or a dead letter) never moves to another queue,
so an answer read before a write stays true through it.
"""

from __future__ import annotations

from collections.abc import Iterable

from queenadmin.models import ConsumerCursor, DeadLetter, Partition

#: The most digits a partition id has (a BIGINT).
_MAX_DIGITS = 18


def partition_number(text: str) -> int | None:
    """The partition id ``text`` names, or None when it cannot name one."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS else None


def queue_names_of_partitions(ids: Iterable[int]) -> dict[int, str]:
    """Partition id -> its queue's name, for the ids that name a partition."""
    wanted = set(ids)
    if not wanted:
        return {}
    return dict(Partition.objects.filter(id__in=wanted).values_list("id", "queue__name"))


def queue_names_of_lease(lease_id: str) -> set[str]:
    """The names of the queues whose partitions the lease ``lease_id`` holds (none: no such lease)."""
    return set(ConsumerCursor.objects.filter(lease_id=lease_id).values_list("partition__queue__name", flat=True))


def queue_name_of_dead_letter(dead_letter_id: int) -> str | None:
    """The name of the queue of dead letter ``dead_letter_id`` (None: no such dead letter)."""
    return DeadLetter.objects.filter(pk=dead_letter_id).values_list("queue__name", flat=True).first()
