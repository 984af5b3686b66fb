"""``/tokens/``: the API tokens, each with its scope and what its grants reach.

Read-only: tokens are made in the admin or with ``apitoken create`` and
revoked or given other grants in the admin (all audited, and held to what
the maker may give: ``domain/tokens.py``). Each row names the account that
made the token. The secret is never stored, so the page shows only a
token's public prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

from queenadmin.dashboard.views.access import staff_page
from queenadmin.domain.tokens import TokenInfo, token_list


@dataclass(frozen=True)
class TokenRow:
    token: TokenInfo
    #: The grants one a line; empty for a token that reaches the whole store.
    grants: list[str]
    admin_url: str


@staff_page("tokens")
def tokens_page(request: HttpRequest) -> HttpResponse:
    rows = [
        TokenRow(
            t,
            [line for line in t.grants.splitlines() if line.strip()],
            reverse("admin:queenadmin_apitoken_changelist") + "?" + urlencode({"q": t.name}),
        )
        for t in token_list()
    ]
    ctx = {
        "page": "tokens",
        "active": [r for r in rows if r.token.revoked_at is None],
        "revoked": [r for r in rows if r.token.revoked_at is not None],
        # Editing happens in the admin, which checks this again.
        "may_edit": request.user.has_perm("queenadmin.change_apitoken"),
    }
    return render(request, "queenadmin/tokens.html", ctx)
