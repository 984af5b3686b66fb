"""A queue's settings from the dashboard: **Edit settings…** on its page,
and **Create a queue…** on ``/queues/``.

Both forms are ``POST /configure`` in another dress. The fields make the
body a client would send (each option's text read as JSON, so ``30`` is a
number, ``null`` restores the default, and ``abc`` reaches the parser as
the string a client might send); the API's parser (``api/wire/configure.py``)
checks it and the API's domain call (``queues.queue_configure``) applies
it, with the operator as ``who`` for the audit entry. So the form and the
API cannot disagree on what is valid, nor word a refusal differently. Each
option's own refusal (``option_changes`` of that option alone) shows beside
its field; the body's first refusal, the API's answer, above the form; the
answer is then 422 with the form.

The options' rows come from the domain's declaration (``options.OPTIONS``):
a new option appears in the table and the forms without a template edit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render

from queenadmin.api.wire import configure as wire
from queenadmin.dashboard import links, live
from queenadmin.dashboard.views.access import HtmxHttpRequest, staff_action, who_of
from queenadmin.dashboard.views.queues import QUEUE, QUEUES
from queenadmin.domain import queues
from queenadmin.domain.queues.options import OptionSetting, option_settings
from queenadmin.errors import InvalidArgument, QueueExists, QueueNotFound

TEMPLATE = "queenadmin/queues/settings.html"
#: The form field of option ``leaseTime`` is ``option-leaseTime``.
FIELD = "option-"
MODES = (
    ("merge", "Merge", "Options you leave blank keep their value (the default)."),
    ("replace", "Replace", "Options you leave blank go back to their default."),
)


def shown_value(value: Any) -> str:
    """An option's value as a field shows it and the API sends it (JSON)."""
    return json.dumps(value)


@dataclass(frozen=True)
class OptionField:
    """One option's row of a form: the option with its current value, what
    the field holds, and the refusal of what it holds, if any."""

    setting: OptionSetting
    typed: str
    error: str = ""

    @property
    def name(self) -> str:
        return self.setting.option.name

    @property
    def field(self) -> str:
        return FIELD + self.name

    @property
    def current(self) -> str:
        return shown_value(self.setting.value)

    @property
    def default(self) -> str:
        return shown_value(self.setting.option.default)

    @property
    def choices(self) -> tuple[tuple[str, str], ...]:
        """A flag's choices: leave it, true, false, its default (null)."""
        return (("", "leave as is"), ("true", "true"), ("false", "false"), ("null", f"default ({self.default})"))


def json_value(text: str) -> Any:
    """What a field's text sends, as a client would: JSON when it parses
    (``30``, ``true``, ``null``), else the text itself as a string (which
    the parser refuses in the API's words)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _fields(settings: tuple[OptionSetting, ...], data: QueryDict | None) -> list[OptionField]:
    """The form's rows: filled with the current values (``data`` None, a
    fresh form), or with what was sent."""
    if data is None:
        return [OptionField(s, shown_value(s.value)) for s in settings]
    return [OptionField(s, str(data.get(FIELD + s.option.name, "")).strip()) for s in settings]


def _checked(fields: list[OptionField]) -> tuple[list[OptionField], dict[str, Any]]:
    """The rows with their own refusals, and the options object they send
    (blank fields are not sent)."""
    given: dict[str, Any] = {}
    checked = []
    for f in fields:
        if not f.typed:
            checked.append(f)
            continue
        value = given[f.name] = json_value(f.typed)
        try:
            wire.option_changes({f.name: value})
        except InvalidArgument as exc:
            f = OptionField(f.setting, f.typed, exc.detail)
        checked.append(f)
    return checked, given


def configure_body(*, name: Any, mode: str, options: dict[str, Any], namespace: str, task: str) -> dict[str, Any]:
    """The ``POST /configure`` body a form's fields stand for: blank
    namespace and task are not sent (they keep their value)."""
    body: dict[str, Any] = {"queue": name, "mode": mode, "options": options}
    for key, value in (("namespace", namespace), ("task", task)):
        if value:
            body[key] = value
    return body


def _changes(before: queues.QueueSettings, after: queues.QueueConfig) -> list[tuple[str, str, str]]:
    """(what, before, after) for each setting the configure changed."""
    found = [
        (s.option.name, shown_value(s.value), shown_value(after.options.get(s.option.name)))
        for s in before.options
        if after.options.get(s.option.name) != s.value
    ]
    for what, old, new in (("namespace", before.namespace, after.namespace), ("task", before.task, after.task)):
        if old != new:
            found.append((what, old or "none", new or "none"))
    return found


def _form(request: HtmxHttpRequest, ctx: dict[str, Any], partial: str, status: int) -> HttpResponse:
    template = TEMPLATE + (f"#{partial}" if request.htmx else "")
    ctx["form"] = partial
    return render(request, template, ctx, status=status)


@staff_action("queue.configure")
def queue_settings_edit(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """GET: the form, filled with the queue's settings. POST: apply it."""
    before = queues.queue_settings(name=name)
    if before is None:
        raise Http404(f"no queue {name}")
    posted = request.method == "POST"
    source = request.POST if posted else request.GET
    fields = _fields(before.options, request.POST if posted else None)
    ctx: dict[str, Any] = {
        "page": "queues",
        "queue_name": name,
        "queue_url": links.queue_url(name),
        "settings": before,
        "modes": MODES,
        "mode": source.get("mode", "merge"),
        "namespace": source.get("namespace", before.namespace or "") if posted else before.namespace or "",
        "task": source.get("task", before.task or "") if posted else before.task or "",
        "reason": source.get("reason", ""),
        "fields": fields,
        "error": "",
    }
    if not posted:
        return _form(request, ctx, "settings-form", 200)
    fields, given = _checked(fields)
    ctx["fields"] = fields
    body = configure_body(
        name=name, mode=ctx["mode"], options=given, namespace=ctx["namespace"].strip(), task=ctx["task"].strip()
    )
    try:
        command = wire.parse_configure(body)
        config = queues.queue_configure(request=command, who=who_of(request), exists=True)
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    except InvalidArgument as exc:
        ctx["error"] = exc.detail
        return _form(request, ctx, "settings-form", 422)
    changes = _changes(before, config)
    ctx.update(changes=changes, replaced=command.replace)
    if request.htmx:
        return live.answer_action(request, QUEUE, f"{TEMPLATE}#settings-outcome", ctx, extra={"name": name})
    if changes:
        done = f"Changed {len(changes)} setting{'s' if len(changes) != 1 else ''} of {name}: " + "; ".join(
            f"{what} {old} → {new}" for what, old, new in changes
        )
    else:
        done = f"Nothing changed on {name}: every setting already had that value"
    messages.success(request, done + ".")
    return HttpResponseRedirect(links.queue_url(name) + "#queue-settings", status=303)


@staff_action("queue.create")
def queue_create(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the form of a new queue (name, namespace, task, options at
    their defaults). POST: create it, refusing a name already taken."""
    posted = request.method == "POST"
    source = request.POST if posted else request.GET
    defaults = option_settings({})
    ctx: dict[str, Any] = {
        "page": "queues",
        "new_name": source.get("name", ""),
        "namespace": source.get("namespace", ""),
        "task": source.get("task", ""),
        "reason": source.get("reason", ""),
        "fields": _fields(defaults, request.POST if posted else None),
        "error": "",
        "name_error": "",
        "existing_url": "",
    }
    if not posted:
        return _form(request, ctx, "create-form", 200)
    fields, given = _checked(ctx["fields"])
    ctx["fields"] = fields
    body = configure_body(
        name=ctx["new_name"], mode="merge", options=given, namespace=ctx["namespace"].strip(), task=ctx["task"].strip()
    )
    try:
        command = wire.parse_configure(body)
        config = queues.queue_configure(request=command, who=who_of(request), exists=False)
    except QueueExists as exc:
        ctx["error"] = ctx["name_error"] = exc.detail
        ctx["existing_url"] = links.queue_url(command.name)
        return _form(request, ctx, "create-form", 422)
    except InvalidArgument as exc:
        ctx["error"] = exc.detail
        # The name is checked first, and its refusals say "queue ...".
        if exc.detail.startswith("queue "):
            ctx["name_error"] = exc.detail
        return _form(request, ctx, "create-form", 422)
    ctx.update(config=config, created_url=links.queue_url(config.name))
    if request.htmx:
        return live.answer_action(request, QUEUES, f"{TEMPLATE}#create-outcome", ctx)
    messages.success(request, f"Created queue {config.name}.")
    return HttpResponseRedirect(links.queue_url(config.name), status=303)
