"""``python manage.py apitoken create|grants|list|revoke``.

It acts as the host's shell (``tokens.HOST``): whoever runs it can read and
write the database directly, so it may make any token, admin scope and
whole store included, and the token names no account. ``--by USER`` makes
or changes a token as that account instead: limited to what the account may
give, kept as the token's maker, and revoked when the account goes. That is
a limit the caller chooses, not a login. Each change is audited with the
shell's user as the actor, ``via`` ``command``.
"""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from queenadmin.domain import clock, tokens
from queenadmin.domain.audit import Who
from queenadmin.errors import QueenError
from queenadmin.models import TokenScope

GRANTS_HELP = """\
grants: limit a token to some resources with --grant KIND:PATTERN=SCOPE, once per grant:
  KIND     kv (KV namespaces), queue, lock (lock names), timer (timer queues), or * for all four
  PATTERN  an exact name (orders), or a prefix ending in * (orders.* = every name starting
           with "orders."; * = every name)
  SCOPE    read, write or admin, at most the token's --scope (write for a write-only token)
  *=SCOPE  is short for *:*=SCOPE
A resource's scope is the highest of the grants that cover it; one no grant covers is out of
reach (403). A token without grants reaches the whole store. Calls over every queue (GET /pop
by namespace or task, /resources/overview, /resources/namespaces, /resources/tasks, /traces/names,
/analytics/worker-metrics, /stats/refresh, GET /dlq without ?queue=, a consumer group's delete or
resubscribe on every queue) need queue:* at their scope; lists (queues, status, consumer groups,
messages, partitions, KV namespaces) show what the token may read. The KV rows of locks
(namespace queen-locks, key NAME#SLOT) count as the lock NAME.

example: apitoken create orders-svc --scope write \\
           --grant 'queue:orders.*=write' --grant 'kv:orders=write' --grant '*=read'
"""

BY_HELP = (
    "Act as the account USER: the token gets at most what USER may give (a superuser anything; "
    "anyone else write at most, with grants that name what it reaches, none on *), names USER as "
    "its maker, and is revoked when USER's account is deleted or deactivated. Not a login: whoever "
    "runs manage.py may name any account, or leave --by out and make any token as the host. "
    "Without it, the token names no account."
)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def _granting(sub: Any, action: str, *, help: str, grant_help: str | None = None) -> CommandParser:
    """The subcommand ``action NAME [--grant KIND:PATTERN=SCOPE ...]``, with the grants help below."""
    parser: CommandParser = sub.add_parser(
        action, help=help, epilog=GRANTS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("name")
    parser.add_argument("--grant", action="append", default=[], metavar="KIND:PATTERN=SCOPE", help=grant_help)
    parser.add_argument("--by", metavar="USER", help=BY_HELP)
    parser.add_argument("--reason", default="", help="Why: kept in the audit entry.")
    return parser


class Command(BaseCommand):
    help = "Create, list and revoke API bearer tokens, and set their grants."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = GRANTS_HELP
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = _granting(
            sub,
            "create",
            help="Create a token; it is printed once, on the last line.",
            grant_help="Limit the token to these resources (repeat for each grant; see below). None: the whole store.",
        )
        create.add_argument(
            "--scope",
            default=TokenScope.WRITE.value,
            help="read (GETs and reads), write (also writes, pops, acks; the default), "
            "admin (also deletes queues, consumer groups and messages), or write-only "
            "(Queen's level: push, timers and ephemeral push, and nothing that reads).",
        )
        _granting(sub, "grants", help="Replace an active token's grants (none: the whole store again).")
        sub.add_parser("list", help="List tokens (never the secrets) with their grants.")
        revoke = sub.add_parser("revoke", help="Revoke the token with that name.")
        revoke.add_argument("name")
        revoke.add_argument("--reason", default="", help="Why: kept in the audit entry.")

    def handle(self, *args: Any, **options: Any) -> None:
        who = Who(_os_user(), options.get("reason") or "", "command")
        try:
            if options["action"] == "create":
                by = self._maker(options["by"])
                token = tokens.token_create(
                    name=options["name"], by=by, scope=options["scope"], grants=options["grant"], who=who
                )
                reach = f"grants {', '.join(options['grant'])}" if options["grant"] else "no grants (the whole store)"
                maker = f", made by account {by.account_name}" if by.account_name else ""
                self.stderr.write(
                    f"Created token {options['name']!r} with scope {options['scope']} and {reach}{maker}."
                    " It is shown once; keep it now."
                )
                self.stdout.write(token)
            elif options["action"] == "grants":
                limits = tokens.token_grants_set(
                    name=options["name"], grants=options["grant"], by=self._maker(options["by"]), who=who
                )
                shown = "none (the whole store)" if limits is None else ", ".join(map(str, limits.grants))
                self.stdout.write(f"Grants of {options['name']!r}: {shown}.")
            elif options["action"] == "revoke":
                tokens.token_revoke(name=options["name"], who=who)
                self.stdout.write(f"Revoked {options['name']!r}.")
            else:
                for info in tokens.token_list():
                    state = f"revoked {clock.iso_micros_z(info.revoked_at)}" if info.revoked_at else "active"
                    grants = ", ".join(info.grants.splitlines()) or "whole store"
                    self.stdout.write(
                        f"{info.name}\t{info.prefix}…\t{info.scope}\t{state}"
                        f"\tcreated {clock.iso_micros_z(info.created_at)}\tby {info.made_by or '-'}\t{grants}"
                    )
        except QueenError as exc:
            raise CommandError(exc.detail) from exc

    @staticmethod
    def _maker(username: str | None) -> tokens.Maker:
        if username is None:
            return tokens.HOST
        user = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first()
        if user is None or not user.is_active:
            raise CommandError(f"--by {username}: no active account of that name")
        return tokens.maker_of(user)
