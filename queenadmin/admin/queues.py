"""The log in the admin: read-only lists, DLQ replay and purge, queue options.

Depth, oldest claimable age and lag are the dashboard's reads
(``domain/queues/board.py``): arithmetic on offsets and cursors for the rows
of the page, never a count of messages.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q, QuerySet
from django.db.models.functions import Substr
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from queenadmin.admin.domain_admin import (
    BATCH,
    Confirmed,
    DomainAdmin,
    DomainForm,
    ReadOnlyAdmin,
    ReasonForm,
    parse_json,
)
from queenadmin.dashboard.text import shown_text
from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.masking import mask_token
from queenadmin.domain.queues import QueueOptions
from queenadmin.domain.queues import board as boards
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.domain.queues.options import BOOL_OPTIONS, INT_OPTIONS
from queenadmin.errors import NotFound, QueenError, QueueNotFound
from queenadmin.models import ConsumerCursor, ConsumerGroup, DeadLetter, Message, Partition, Queue

PREVIEW_CHARS = boards.PREVIEW_CHARS


class QueueFilter(admin.SimpleListFilter):
    """By queue, named from the queues table (never a DISTINCT over rows)."""

    title = "queue"
    parameter_name = "queue"
    #: The filtered model reaches its queue through its partition.
    via_partition = False

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(n, n) for n in Queue.objects.order_by("name").values_list("name", flat=True)[:200]]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        # Ids first, then an indexed filter: no join on the listed rows.
        queue_id = Queue.objects.filter(name=value).values_list("id", flat=True).first()
        if queue_id is None:
            return queryset.none()
        if self.via_partition:
            parts = list(Partition.objects.filter(queue_id=queue_id).values_list("id", flat=True))
            return queryset.filter(partition_id__in=parts)
        return queryset.filter(queue_id=queue_id)


class MessageQueueFilter(QueueFilter):
    via_partition = True


def _age(at: datetime | None) -> str:
    return "" if at is None else timesince(at, clock.now())


class BoardChangeList(ChangeList):
    """A changelist that reads the boards of the queues on its page at once
    and hangs each on its row (model admins are shared between threads, so
    nothing per request is kept on them)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        admin_ = self.model_admin
        assert isinstance(admin_, BoardAdmin)
        rows = list(self.result_list)  # fills the page's result cache
        names = {admin_.queue_name_of(row) for row in rows}
        found = boards.queue_boards_named(names=names, with_groups=self.model is ConsumerGroup)
        for row in rows:
            row._board = found.get(admin_.queue_name_of(row))


P = TypeVar("P")


def board_column(
    description: str, find: Callable[[Any, Any], P | None], show: Callable[[P], int | str]
) -> Callable[[Any, Any], int | str]:
    """A list column read from the part of a row's queue board that ``find``
    (the admin's method) picks; blank when there is none."""

    @admin.display(description=description)
    def column(model_admin: Any, row: Any) -> int | str:
        found = find(model_admin, row)
        return "" if found is None else show(found)

    return column


class BoardAdmin(ReadOnlyAdmin):
    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return BoardChangeList

    def queue_name_of(self, row: Any) -> str:
        raise NotImplementedError

    def board(self, row: Any) -> boards.QueueBoard | None:
        found: boards.QueueBoard | None
        if hasattr(row, "_board"):
            found = row._board
        else:
            # One object's page: read its queue's board (with the groups' lag).
            found = row._board = boards.queue_board(name=self.queue_name_of(row))
        return found


# --------------------------------------------------------------------------
# Queues


class ConfigureForm(DomainForm):
    options_text = forms.CharField(
        label="Options",
        widget=forms.Textarea(attrs={"rows": 14, "cols": 60}),
        help_text="JSON: the options to change (others keep their values; null restores a default).",
    )

    class Meta(DomainForm.Meta):
        model = Queue

    def show(self, row: Queue) -> None:
        self.fields["options_text"].initial = json.dumps(row.options, indent=2, sort_keys=True)

    def clean_options_text(self) -> QueueOptions:
        wanted = parse_json(self.cleaned_data["options_text"])
        if not isinstance(wanted, dict):
            raise forms.ValidationError("a JSON object of option names and values")
        current = self.instance.options or {}
        changes = []
        for name, value in wanted.items():
            if name not in INT_OPTIONS and name not in BOOL_OPTIONS:
                if current.get(name) == value:
                    continue
                raise forms.ValidationError(f"no option {name}")
            if value is not None and current.get(name) == value:
                continue
            changes.append((name, value))
        try:
            return QueueOptions(tuple(changes))
        except (QueenError, TypeError) as exc:
            raise forms.ValidationError(str(getattr(exc, "detail", exc))) from exc


class PurgeForm(ReasonForm):
    confirm_name = forms.CharField(label="Type the queue's name to confirm")

    def __init__(self, *args: Any, expected: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.expected = expected

    def clean_confirm_name(self) -> str:
        typed = str(self.cleaned_data["confirm_name"]).strip()
        # A text field drops line breaks: a name stored before the rule of
        # names is typed as the page spells it (``orders.\\nboom``).
        spelled = shown_text(self.expected)
        if typed not in (self.expected, spelled):
            raise forms.ValidationError(f"type '{spelled}' exactly")
        return typed


class DeleteGroupForm(PurgeForm):
    confirm_name = forms.CharField(label="Type the group's name to confirm")


class SeekTimeForm(ReasonForm):
    at = forms.DateTimeField(label="Seek to (UTC)", help_text="e.g. 2026-12-03 09:00:00")


class ReplayForm(ReasonForm):
    target = forms.ChoiceField(
        label="Who gets each copy",
        choices=[
            ("group", "The group that failed it, only (other groups pass over the copy)"),
            ("all", "Every consumer group of the queue"),
        ],
        initial="group",
        required=False,
        widget=forms.RadioSelect,
    )

    def clean_target(self) -> str:
        return str(self.cleaned_data.get("target") or "group")


#: What every group action does to the group's leases.
LEASES_END = "Its leases end now: a consumer holding a batch gets 'invalid or expired lease' on its ack."


def purge_all(*, queue: str, who: Who, upto: int | None) -> int:
    """Purge a queue's DLQ up to id ``upto``, one bounded transaction at a time."""
    total = 0
    selection = boards.DeadLetterFilter(queue=queue, upto=upto)
    while True:
        result = queue_operator.queue_dlq_action(verb="purge", selection=selection, who=who, batch=BATCH)
        total += result.done
        if not result.more:
            return total


@admin.register(Queue)
class QueueAdmin(BoardAdmin):
    form = ConfigureForm
    list_display = ("name", "namespace", "task", "depth", "claimable", "in_flight", "oldest_claimable", "dead_letters")
    search_fields = ("=name", "name__startswith")
    ordering = ("name",)
    readonly_fields = (
        "name",
        "namespace",
        "task",
        "created_at",
        "depth",
        "oldest_claimable",
        "dead_letters",
        # Paused and resumed on the dashboard's queue page or through the API.
        "paused",
        "paused_groups",
    )
    fields = (*readonly_fields, "options_text", "reason")
    actions = ("purge_dlq", "purge_queue")

    def queue_name_of(self, row: Queue) -> str:
        return row.name

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return DomainAdmin.has_change_permission(self, request, obj)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if not self.has_change_permission(request, obj):
            return (*self.readonly_fields, "options")
        return self.fields

    depth = board_column("pending", BoardAdmin.board, lambda b: b.pending)
    claimable = board_column("claimable", BoardAdmin.board, lambda b: b.claimable)
    in_flight = board_column("in flight", BoardAdmin.board, lambda b: b.in_flight)
    oldest_claimable = board_column("oldest claimable", BoardAdmin.board, lambda b: _age(b.oldest_claimable_at))
    dead_letters = board_column("DLQ", BoardAdmin.board, lambda b: f"{b.dlq:,}+" if b.dlq_capped else f"{b.dlq:,}")

    def save_model(self, request: HttpRequest, obj: Queue, form: Any, change: bool) -> None:
        data = form.cleaned_data
        self.in_view(
            request,
            lambda: queue_operator.queue_operator_configure_in_txn(
                name=obj.name, options=data["options_text"], who=self.who(request, data["reason"])
            ),
        )

    @admin.action(description="Purge the DLQ of the selected queue", permissions=["purge"])
    def purge_dlq(self, request: HttpRequest, queryset: QuerySet[Queue]) -> TemplateResponse | None:
        name = self.the_one(
            request, queryset.values_list("name", flat=True), "Select exactly one queue to purge its DLQ."
        )
        if name is None:
            return None
        upto = DeadLetter.objects.filter(queue__name=name).order_by("-id").values_list("id", flat=True).first()
        page = self.confirmed(
            request,
            queryset,
            perm="delete_deadletter",
            title="Purge the DLQ",
            warning=f"Every dead letter of {shown_text(name)} now in its DLQ is deleted for good.",
            form_class=PurgeForm,
            form_kwargs={"expected": name},
        )
        if isinstance(page, TemplateResponse):
            return page
        if upto is None:
            self.message_user(request, f"The DLQ of {name} is empty.", messages.WARNING)
            return None
        done = purge_all(queue=name, who=page.who, upto=upto)
        self.message_user(request, f"Purged {done} dead letters of {name}.", messages.SUCCESS)
        return None

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("queenadmin.delete_deadletter"))

    def has_recover_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("queenadmin.change_queue"))

    @admin.action(description="Purge the messages of the selected queue", permissions=["recover"])
    def purge_queue(self, request: HttpRequest, queryset: QuerySet[Queue]) -> TemplateResponse | None:
        name = self.the_one(
            request, queryset.values_list("name", flat=True), "Select exactly one queue to purge its messages."
        )
        if name is None:
            return None
        page = self.confirmed(
            request,
            queryset,
            perm="change_queue",
            title="Purge the queue's messages",
            warning=(
                f"Every message stored in {shown_text(name)} is deleted for good: claimable, parked, in flight "
                "and done. The queue, its options, its consumer groups and its dead letters stay; each group reads on "
                "from what is pushed next, and leases on purged messages end."
            ),
            form_class=PurgeForm,
            form_kwargs={"expected": name},
        )
        if isinstance(page, TemplateResponse):
            return page
        deleted = 0
        step = None
        try:
            while step is None or step.more:
                step = queue_operator.queue_purge(queue=name, who=page.who, resume_at=step.resume_at if step else None)
                deleted += step.deleted
        except QueueNotFound:
            self.message_user(request, f"The queue {name} is gone.", messages.ERROR)
            return None
        self.message_user(request, f"Purged {deleted} messages of {name}.", messages.SUCCESS)
        return None


# --------------------------------------------------------------------------
# Partitions, consumer groups, messages


class InQueueAdmin(BoardAdmin):
    """Rows named within their queue (partitions, consumer groups)."""

    list_filter = (QueueFilter,)
    search_fields = ("=name",)
    ordering = ("queue__name", "name")
    list_select_related = ("queue",)

    def queue_name_of(self, row: Partition | ConsumerGroup) -> str:
        return row.queue.name


@admin.register(Partition)
class PartitionAdmin(InQueueAdmin):
    list_display = ("queue", "name", "last_offset", "pending", "oldest_claimable", "dead_letters", "last_push_at")

    def _part(self, row: Partition) -> boards.PartitionBoard | None:
        found = self.board(row)
        return None if found is None else next((p for p in found.partitions if p.id == row.pk), None)

    @admin.display(description="last offset", empty_value="-")
    def last_offset(self, row: Partition) -> int | None:
        # Offsets start at 0: an empty partition has no last offset.
        return row.next_offset - 1 if row.next_offset > 0 else None

    pending = board_column("pending", _part, lambda p: p.pending)
    oldest_claimable = board_column("oldest claimable", _part, lambda p: _age(p.oldest_claimable_at))
    dead_letters = board_column("DLQ", _part, lambda p: p.dlq)


def _stamp(at: datetime | None) -> str:
    """``2026-12-03 08:44:10 UTC``: short enough for a table cell."""
    return "" if at is None else date_format(timezone.localtime(at), "Y-m-d H:i:s T")


#: Partitions listed on a consumer group's page (one row each).
GROUP_PARTITIONS_SHOWN = 200


@admin.register(ConsumerGroup)
class ConsumerGroupAdmin(InQueueAdmin):
    list_display = (
        "queue",
        "name",
        "subscription_mode",
        "conflation",
        "lag",
        "in_flight",
        "oldest_pending",
        "last_claim",
    )
    fields = (
        "queue",
        "name",
        "subscription_mode",
        "conflation",
        "created_at",
        "lag",
        "in_flight",
        "oldest_pending",
        "last_claim",
        "partitions",
        "on_the_dashboard",
    )
    readonly_fields = fields
    actions = ("seek_start", "seek_end", "seek_time", "reset_groups", "delete_group")

    class Media:
        css = {"all": ("queenadmin/admin.css",)}

    def has_recover_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("queenadmin.change_queue"))

    def _recover(
        self,
        request: HttpRequest,
        queryset: QuerySet[ConsumerGroup],
        *,
        action: queue_operator.GroupAction,
        to: queue_operator.SeekTo = "start",
        title: str,
        warning: str,
        done: str,
        form_class: type[ReasonForm] | None = None,
    ) -> TemplateResponse | None:
        """``action`` on each selected group through the domain (one
        transaction and one audit entry each)."""

        def act(row: ConsumerGroup, page: Confirmed) -> str | None:
            try:
                queue_operator.queue_group_operator(
                    queue=row.queue.name,
                    group=row.name,
                    action=action,
                    to=to,
                    at=page.data.get("at"),
                    who=page.who,
                )
            except NotFound:
                return "no longer there"
            return None

        return self.each_confirmed(
            request,
            queryset.select_related("queue"),
            act,
            done=done,
            perm="change_queue",
            title=title,
            warning=warning + " " + LEASES_END,
            form_class=form_class,
        )

    @admin.action(description="Seek the selected groups to the start", permissions=["recover"])
    def seek_start(self, request: HttpRequest, queryset: QuerySet[ConsumerGroup]) -> TemplateResponse | None:
        return self._recover(
            request,
            queryset,
            action="seek",
            to="start",
            title="Seek to the start",
            warning="Each group reads every message still stored again, on every partition of its queue.",
            done="Moved to the start",
        )

    @admin.action(description="Seek the selected groups to the end", permissions=["recover"])
    def seek_end(self, request: HttpRequest, queryset: QuerySet[ConsumerGroup]) -> TemplateResponse | None:
        return self._recover(
            request,
            queryset,
            action="seek",
            to="end",
            title="Seek to the end",
            warning="Each group skips every message pushed so far (not dead-lettered: nothing records them).",
            done="Moved to the end",
        )

    @admin.action(description="Seek the selected groups to a time", permissions=["recover"])
    def seek_time(self, request: HttpRequest, queryset: QuerySet[ConsumerGroup]) -> TemplateResponse | None:
        return self._recover(
            request,
            queryset,
            action="seek",
            to="time",
            title="Seek to a time",
            warning="Each group reads on from the first message pushed after the time; earlier ones count as done.",
            done="Moved to the time",
            form_class=SeekTimeForm,
        )

    @admin.action(description="Reset the selected groups to their subscription start", permissions=["recover"])
    def reset_groups(self, request: HttpRequest, queryset: QuerySet[ConsumerGroup]) -> TemplateResponse | None:
        return self._recover(
            request,
            queryset,
            action="reset",
            title="Reset consumer groups",
            warning="Each cursor goes back where the group started (its subscription start); the group stays.",
            done="Reset",
        )

    @admin.action(description="Delete the selected group", permissions=["recover"])
    def delete_group(self, request: HttpRequest, queryset: QuerySet[ConsumerGroup]) -> TemplateResponse | None:
        row = self.the_one(request, queryset.select_related("queue"), "Select exactly one consumer group to delete.")
        if row is None:
            return None
        page = self.confirmed(
            request,
            queryset,
            perm="change_queue",
            title="Delete a consumer group",
            warning=(
                f"The group {shown_text(row.name)} is forgotten on {shown_text(row.queue.name)}: its positions "
                "and its registration. Its next pop registers it anew, placed by its subscription mode. " + LEASES_END
            ),
            form_class=DeleteGroupForm,
            form_kwargs={"expected": row.name},
        )
        if isinstance(page, TemplateResponse):
            return page
        try:
            queue_operator.queue_group_operator(queue=row.queue.name, group=row.name, action="delete", who=page.who)
        except NotFound:
            self.message_user(request, f"The group {row.name} is no longer on {row.queue.name}.", messages.WARNING)
            return None
        self.message_user(request, f"Deleted the group {row.name} on {row.queue.name}.", messages.SUCCESS)
        return None

    def _group(self, row: ConsumerGroup) -> boards.GroupLag | None:
        found = self.board(row)
        if found is not None and not found.groups:
            found = boards.queue_board(name=row.queue.name)
        return None if found is None else next((g for g in found.groups if g.name == row.name), None)

    lag = board_column("lag", _group, lambda g: g.lag)
    in_flight = board_column("in flight", _group, lambda g: g.in_flight)
    oldest_pending = board_column("oldest pending", _group, lambda g: _age(g.oldest_pending_at))
    last_claim = board_column("last claim", _group, lambda g: _age(g.last_claim_at))

    @admin.display(description="where it stands, per partition")
    def partitions(self, row: ConsumerGroup) -> SafeString:
        """The group's cursor on each partition: done up to, pending, the
        leased batch (its lease id masked, like a lock's owner), retries."""
        cursors = list(
            ConsumerCursor.objects.filter(partition__queue_id=row.queue_id, group=row.name)
            .select_related("partition")
            .order_by("partition__name")[: GROUP_PARTITIONS_SHOWN + 1]
        )
        if not cursors:
            return format_html("<p>{}</p>", "No partition claimed by this group yet.")
        now = clock.now()
        head = ("partition", "done up to", "last offset", "pending", "leased", "lease", "leased until",
                "retries", "dead-lettered", "delivered / acked / failed", "last claim")  # fmt: skip

        def cells(c: ConsumerCursor) -> tuple[Any, ...]:
            last = c.partition.next_offset - 1
            leased = c.lease_id is not None and c.leased_until is not None and c.leased_until > now
            return (
                c.partition.name,
                c.committed_offset if c.committed_offset >= 0 else "nothing",
                last if last >= 0 else "-",
                max(last - c.committed_offset, 0),
                c.batch_last - c.committed_offset if leased else 0,
                mask_token(c.lease_id) if leased else "-",
                _stamp(c.leased_until) if leased else "-",
                c.retry_count,
                c.dead_lettered,
                f"{c.delivered} / {c.acked} / {c.failed}",
                _stamp(c.last_claim_at) or "never",
            )

        more = ""
        if len(cursors) > GROUP_PARTITIONS_SHOWN:
            more = f"The first {GROUP_PARTITIONS_SHOWN} partitions by name are shown."
        return format_html(
            "<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>{}",
            format_html_join("", '<th scope="col">{}</th>', ((h,) for h in head)),
            format_html_join(
                "",
                "<tr>{}</tr>",
                (
                    (format_html_join("", "<td>{}</td>", ((v,) for v in cells(c))),)
                    for c in cursors[:GROUP_PARTITIONS_SHOWN]
                ),
            ),
            format_html("<p>{}</p>", more) if more else "",
        )

    @admin.display(description="dashboard")
    def on_the_dashboard(self, row: ConsumerGroup) -> SafeString:
        url = reverse("dashboard:queue", args=[row.queue.name])
        return format_html(
            '<a href="{}">The queue {} on the dashboard</a> (depth, lag, messages, dead letters)', url, row.queue.name
        )


def _exact_ids(queryset: QuerySet[Any], term: str, fields: tuple[str, ...]) -> QuerySet[Any]:
    """Rows whose id field equals ``term`` exactly: an index lookup (Django's
    ``=`` search is ``iexact``, which no index serves)."""
    term = term.strip()
    if not term:
        return queryset
    match = Q(pk__in=[])
    for field in fields:
        match |= Q(**{field: term})
    return queryset.filter(match)


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


class LogRowsAdmin(ReadOnlyAdmin):
    """A million rows (messages, dead letters): exact-match search on
    indexed ids only, a capped count, the payload cut in the database."""

    #: The id fields a search term must equal.
    exact_fields: tuple[str, ...] = ("message_id",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        if (
            request.resolver_match
            and request.resolver_match.url_name
            and "changelist" in request.resolver_match.url_name
        ):
            rows = rows.defer("payload").annotate(cut_payload=Substr("payload", 1, PREVIEW_CHARS + 1))
        return rows

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        return _exact_ids(queryset, search_term, self.exact_fields), False

    @admin.display(description="payload")
    def preview(self, row: Message | DeadLetter) -> str:
        return _preview(getattr(row, "cut_payload", None) or row.payload)


@admin.register(Message)
class MessageAdmin(LogRowsAdmin):
    list_display = ("message_id", "queue_name", "partition_name", "offset", "transaction_id", "preview", "created_at")
    list_filter = (MessageQueueFilter,)
    search_fields = ("message_id",)
    search_help_text = "A message id, exactly."
    ordering = ("-id",)
    list_select_related = ("partition__queue",)
    readonly_fields = ("partition", "offset", "message_id", "transaction_id", "trace_id", "payload", "created_at")

    @admin.display(description="queue")
    def queue_name(self, row: Message) -> str:
        return row.partition.queue.name

    @admin.display(description="partition")
    def partition_name(self, row: Message) -> str:
        return row.partition.name


# --------------------------------------------------------------------------
# Dead letters


class DeadLetterPurgeForm(PurgeForm):
    pass


@admin.register(DeadLetter)
class DeadLetterAdmin(LogRowsAdmin):
    list_display = ("id", "queue", "partition_name", "group", "offset", "message_id", "preview", "error", "failed_at")
    list_filter = (QueueFilter, "group")
    search_fields = ("message_id", "transaction_id")
    search_help_text = "A message id or transactionId, exactly."
    ordering = ("-id",)
    list_select_related = ("queue", "partition")
    readonly_fields = (
        "queue",
        "partition",
        "group",
        "offset",
        "message_id",
        "transaction_id",
        "payload",
        "error",
        "retry_count",
        "created_at",
        "failed_at",
    )
    exact_fields = ("message_id", "transaction_id")
    actions = ("replay", "purge")

    def has_replay_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("queenadmin.change_deadletter"))

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("queenadmin.delete_deadletter"))

    @admin.display(description="partition")
    def partition_name(self, row: DeadLetter) -> str:
        return row.partition.name

    def _by_queue(self, queryset: QuerySet[DeadLetter]) -> dict[str, list[int]]:
        found: dict[str, list[int]] = defaultdict(list)
        for name, pk in queryset.order_by("id").values_list("queue__name", "id").iterator(chunk_size=BATCH):
            found[name].append(pk)
        return found

    def _in_batches(
        self,
        request: HttpRequest,
        queryset: QuerySet[DeadLetter],
        page: Confirmed,
        verb: queue_operator.DLQVerb,
        past: str,
    ) -> None:
        """Replay or purge (``verb``) the selected ids, queue by queue,
        ``BATCH`` ids to a transaction."""
        done = to_every_group = duplicates = 0
        target: queue_operator.ReplayTarget = "all" if page.data.get("target") == "all" else "group"
        for name, ids in self._by_queue(queryset).items():
            for start in range(0, len(ids), BATCH):
                chunk = tuple(ids[start : start + BATCH])
                selection = boards.DeadLetterFilter(queue=name)
                result = queue_operator.queue_dlq_action(
                    verb=verb, selection=selection, who=page.who, ids=chunk, target=target
                )
                done += result.done
                to_every_group += result.to_every_group
                duplicates += result.duplicates
        note = ""
        if verb == "replay":
            note = (
                ", for every consumer group"
                if target == "all"
                else ", for the group that failed each only"
                + (f" ({to_every_group} for every group: their group no longer consumes)" if to_every_group else "")
            )
            note += " (transactionId dlq:<id>)"
        if duplicates:
            note += f"; {duplicates} kept in the DLQ, their copy (dlq:<id>) already in the queue"
        self.message_user(request, f"{past} {done} dead letters{note}.", messages.SUCCESS)

    @admin.action(description="Replay the selected dead letters", permissions=["replay"])
    def replay(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> TemplateResponse | None:
        page = self.confirmed(
            request,
            queryset,
            perm="change_deadletter",
            title="Replay dead letters",
            warning=(
                "Each is appended to its partition as a new message with transactionId dlq:<dead letter id> "
                "(a repeated replay is a duplicate, not a second delivery) and leaves the DLQ. By default only "
                "the group that failed it gets the copy; choose every group below to hand it to all."
            ),
            form_class=ReplayForm,
        )
        if isinstance(page, TemplateResponse):
            return page
        self._in_batches(request, queryset, page, "replay", "Replayed")
        return None

    @admin.action(description="Purge the selected dead letters", permissions=["purge"])
    def purge(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> TemplateResponse | None:
        names = list(queryset.order_by().values_list("queue__name", flat=True).distinct()[:2])
        if len(names) != 1:
            self.message_user(request, "Select dead letters of one queue (filter by queue) to purge.", messages.ERROR)
            return None
        page = self.confirmed(
            request,
            queryset,
            perm="delete_deadletter",
            title="Purge dead letters",
            warning="The selected dead letters are deleted for good.",
            form_class=DeadLetterPurgeForm,
            form_kwargs={"expected": names[0]},
        )
        if isinstance(page, TemplateResponse):
            return page
        self._in_batches(request, queryset, page, "purge", "Purged")
        return None
