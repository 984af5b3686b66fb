"""``python manage.py apitoken create|list|revoke``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from queenadmin.domain import clock, tokens
from queenadmin.errors import QueenError
from queenadmin.models import TokenScope


class Command(BaseCommand):
    help = "Create, list and revoke API bearer tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a token; it is printed once, on the last line.")
        create.add_argument("name")
        create.add_argument(
            "--scope",
            default=TokenScope.WRITE.value,
            help="read (GETs and reads), write (also writes, pops, acks; the default) "
            "or admin (also deletes queues, consumer groups and messages).",
        )
        sub.add_parser("list", help="List tokens (never the secrets).")
        revoke = sub.add_parser("revoke", help="Revoke the token with that name.")
        revoke.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "create":
                token = tokens.token_create(name=options["name"], scope=options["scope"])
                self.stderr.write(
                    f"Created token {options['name']!r} with scope {options['scope']}. It is shown once; keep it now."
                )
                self.stdout.write(token)
            elif options["action"] == "revoke":
                tokens.token_revoke(name=options["name"])
                self.stdout.write(f"Revoked {options['name']!r}.")
            else:
                for info in tokens.token_list():
                    state = f"revoked {clock.iso_micros_z(info.revoked_at)}" if info.revoked_at else "active"
                    self.stdout.write(
                        f"{info.name}\t{info.prefix}…\t{info.scope.value}\t{state}"
                        f"\tcreated {clock.iso_micros_z(info.created_at)}"
                    )
        except QueenError as exc:
            raise CommandError(exc.detail) from exc
