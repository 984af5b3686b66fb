from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models


class TokenScope(models.TextChoices):
    """What a token may do, a hierarchy: each scope includes the ones before it.

    ``read`` reads, ``write`` also writes, pops and acks, ``admin`` also
    deletes resources (queues, consumer groups, messages). Which routes need
    which is ``queenadmin/api/scopes.py``.
    """

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def covers(self, need: TokenScope) -> bool:
        """Whether a token of this scope may do what needs ``need``."""
        return _RANK[self] >= _RANK[need]


#: On every API call: a dict, not a walk of the enum (3 us -> 0.2 us).
_RANK = {scope: rank for rank, scope in enumerate(TokenScope)}


class ApiToken(models.Model):
    """A bearer token for /api/v1. Only the SHA-256 of the secret is kept."""

    name = models.CharField(max_length=100, unique=True)
    #: Hex SHA-256 of the token; the token itself is shown once, at creation.
    token_hash = models.CharField(max_length=64, unique=True)
    #: The first characters of the token, enough to recognise it in a list.
    prefix = models.CharField(max_length=12)
    #: Tokens made before scopes existed became ``admin`` when scopes came (migration 0013),
    #: so nothing they did is refused; new ones default to ``write``.
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.WRITE)
    created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    #: The resources the token may reach, one grant a line (``queue:orders.*=write``;
    #: the syntax is ``domain/tokens.py``'s). Empty: the whole store, as before grants.
    grants = models.TextField(blank=True, default="")
    #: The account that made the token (it saw the secret): its tokens are
    #: revoked when it is deleted or deactivated. Empty for tokens made on the
    #: host's shell (``manage.py apitoken`` without ``--by``, ``serve``'s first
    #: run) and for those made before makers were recorded.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: The maker's user name when it made the token, kept after the account is deleted.
    created_by_name = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "active"
        return f"{self.name} ({self.prefix}…, {self.scope}, {state})"

    @staticmethod
    def hash_of(token: str) -> str:
        """The ``token_hash`` a token is stored as: its hex SHA-256."""
        return hashlib.sha256(token.encode()).hexdigest()


class AuditEntry(models.Model):
    """Who changed what from the dashboard, the admin, a command or the API, and how."""

    at = models.DateTimeField()
    actor = models.CharField(max_length=150)
    action = models.CharField(max_length=64)
    target = models.TextField()
    before = models.TextField(blank=True, default="")
    after = models.TextField(blank=True, default="")
    #: Why the operator did it, as they typed it (may be empty).
    reason = models.TextField(blank=True, default="")
    #: What kind of object ``target`` names: ``lock``, ``timer``, ``kv``, ``queue``, ``dlq``, ``ephemeral``,
    #: ``token``, ``login`` (an account or a client address: lockouts, unlocks, second factors).
    kind = models.CharField(max_length=16, blank=True, default="")
    #: Where the action came from: ``dashboard``, ``admin``, ``command`` or ``api`` (``actor`` is
    #: then the API token's name, or ``jwt:<sub>`` for a Queen JWT).
    via = models.CharField(max_length=16, blank=True, default="")

    class Meta:
        verbose_name_plural = "audit entries"
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["-at", "-id"], name="audit_at_idx"),
            models.Index(fields=["kind", "-at"], name="audit_kind_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target}"
