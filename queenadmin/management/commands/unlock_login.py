"""``python manage.py unlock_login [--user NAME] [--address IP] [--list]``."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from queenadmin.domain import clock, logins
from queenadmin.domain.audit import Who
from queenadmin.errors import QueenError


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


class Command(BaseCommand):
    help = (
        "Unlock logins that too many failures locked: forget the failed logins of an account "
        "(from every address) and of a client address (to every account). Recorded in the audit."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", action="append", default=[], help="An account's user name (repeatable).")
        parser.add_argument("--address", action="append", default=[], help="A client address (repeatable).")
        parser.add_argument("--reason", default="", help="Why: kept in the audit entry.")
        parser.add_argument("--list", action="store_true", help="List what is locked out now, and change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            for kind, name in logins.locked_out(now=clock.now()):
                self.stdout.write(f"{kind}\t{name}")
            return
        if not options["user"] and not options["address"]:
            raise CommandError("name what to unlock: --user NAME and/or --address IP (--list shows what is locked)")
        who = Who(_os_user(), options["reason"], "command")
        try:
            for username in options["user"]:
                done = logins.login_unlock(who=who, username=username)
                self.stdout.write(f"account {username}: {self._said(done)}")
            for address in options["address"]:
                done = logins.login_unlock(who=who, address=address)
                self.stdout.write(f"address {address}: {self._said(done)}")
        except QueenError as exc:
            raise CommandError(exc.detail) from exc

    @staticmethod
    def _said(done: logins.Unlocked) -> str:
        if not done.records:
            return "nothing to unlock"
        return f"unlocked ({done.records} failed-login record{'s' if done.records != 1 else ''} forgotten)"
