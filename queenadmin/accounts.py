"""What an account's going does to the API tokens it made: they are revoked.

The account saw each secret when it made the token, so a token that
outlived the account would be a credential nobody answers for. The
receivers below hear of every delete and every save of Django's user model
(the admin's user pages, its bulk delete, ``manage.py shell``) and revoke,
in the same transaction, the active tokens that account made; each
revocation is audited with the account as the actor, ``via`` ``account``.
A bulk ``update(is_active=False)`` sends no signal: ``token_check`` then
refuses the tokens while the account stays inactive. Nothing reassigns a
token to another account: its maker still knows the secret, so a service
keeps running by switching to a new token, made before the account goes.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save, pre_delete
from django.dispatch import receiver

from queenadmin.domain.audit import Who
from queenadmin.domain.tokens import token_revoke_made_by

#: Where the audit says these revocations came from.
VIA = "account"


@receiver(pre_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="queenadmin.accounts.deleted")
def deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    # Before the delete sets the tokens' created_by to NULL.
    name = instance.get_username()
    token_revoke_made_by(account_id=instance.pk, who=Who(name, f"the account {name} was deleted", VIA))


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="queenadmin.accounts.saved")
def saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if instance.is_active or created:
        return
    name = instance.get_username()
    token_revoke_made_by(account_id=instance.pk, who=Who(name, f"the account {name} was deactivated", VIA))
