"""Every dashboard page at 1440x900 and 390x844, light and dark: no sideways
scroll, and axe-core (``tests/browser/package.json``, installed by
``.ci/install-system``) finds no serious or critical violation. Plus what
only a browser shows: the theme toggle remembered across the dashboard and
the admin, the skip link, and the focus ring on the dark top bar.

The pages hold data (queues with messages, two consumer groups, dead
letters, keys, locks and a semaphore, timers, audit entries), made through
the API and the domain, so tables are not empty when they are checked.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, SHOTS, api

pytestmark = pytest.mark.live

AXE = Path(__file__).parent / "node_modules" / "axe-core" / "axe.min.js"
SIZES = {"wide": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
SCHEMES = ("light", "dark")
#: What fails the check; "moderate" and "minor" findings are not counted.
BLOCKING = ("serious", "critical")
# QA_SHOTS=1 (conftest.SHOTS) also saves every page at both sizes in both
# schemes under test-artifacts/browser/ (180 full-page screenshots).

Q = "pages-orders"
DEAD_Q = "pages-mail"
EPH_Q = "pages-presence"

USERS = """
from django.contrib.auth.models import User
User.objects.create_user("nico", password="pw", is_staff=False)
"""

# Operator actions through the domain, so the audit trail has entries whose
# before and after hold times (a key's expiry, a timer's due time), and one
# made in the admin (its row's Source column says "admin").
AUDIT = f"""
from datetime import timedelta
from queenadmin.domain import kv, timers
from queenadmin.domain.audit import Who
from queenadmin.domain.kv.operator import kv_operator_edit
from queenadmin.domain.timers.operator import SeenTimer, timer_operator_action
row = kv.kv_get(namespace="pages-config", key="feature.flag-1")
kv_operator_edit(namespace="pages-config", key="feature.flag-1", value={{"on": False}}, expect=row.version,
                 expiry=timedelta(hours=6), who=Who("otto", "roll back the flag"))
row = kv.kv_get(namespace="pages-config", key="feature.flag-2")
kv_operator_edit(namespace="pages-config", key="feature.flag-2", value={{"on": True}}, expect=row.version,
                 who=Who("otto", "as asked in the admin", via="admin"))
(t,) = timers.timers_pending(queue="{Q}", key_prefix="pages-reminder-0").rows
seen = SeenTimer(queue=t.queue, timer_key=t.timer_key, message_id=t.message_id, txn=t.txn, partition=t.partition)
timer_operator_action(verb="move", seen=seen, who=Who("otto", "after the release"), by=timedelta(minutes=15))
"""


def _seed(server: Any) -> None:
    with api(server) as client:
        items = [
            {"queue": q, "partition": part, "payload": {"order": i, "note": "x" * (i % 7)}}
            for q, n in ((Q, 30), (DEAD_Q, 6))
            for part in ("Default", "eu-west")
            for i in range(n)
        ]
        assert client.post("/api/v1/push", json={"items": items}).status_code == 201
        configured = {"queue": EPH_Q, "options": {"maxLength": 500, "policy": "dropOldest", "ttlSeconds": 60}}
        assert client.post("/api/v1/ephemeral/configure", json=configured).status_code == 201
        typing = {"queue": EPH_Q, "partition": "room-7", "messages": [{"payload": {"user": i}} for i in range(5)]}
        assert client.post("/api/v1/ephemeral/push", json=typing).status_code == 201
        # The groups' leases outlive the module: an auto-created queue's 60 s
        # lease ran out on a slow hour before the leases page was reached.
        leased = {"queue": Q, "options": {"leaseTime": 3600}}
        assert client.post("/api/v1/configure", json=leased).status_code == 200
        for group, batch in (("fulfillment", 8), ("analytics", 3)):
            answer = client.get(
                f"/api/v1/pop/queue/{Q}", params={"consumerGroup": group, "wait": "false", "batch": batch}
            )
            assert answer.status_code == 200, answer.text
        assert client.post("/api/v1/configure", json={"queue": DEAD_Q, "options": {"retryLimit": 0}}).status_code == 200
        body = client.get(f"/api/v1/pop/queue/{DEAD_Q}/partition/Default", params={"wait": "false", "batch": 3}).json()
        acks = [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "failed",
             "leaseId": body["leaseId"], "error": f"smtp 550 mailbox unavailable ({i})"}
            for i, m in enumerate(body["messages"])
        ]  # fmt: skip
        assert (
            client.post("/api/v1/ack/batch", json={"acknowledgments": acks, "consumerGroup": None}).status_code == 200
        )
        # Paused badges: on the whole of one queue, and on one group of the other.
        assert client.post(f"/api/v1/resources/queues/{DEAD_Q}/pause").status_code == 200
        assert client.post(f"/api/v1/consumer-groups/analytics/queues/{Q}/pause").status_code == 200
        ops = [
            {
                "op": "put",
                "ns": "pages-config",
                "key": f"feature.flag-{i}",
                "value": {"on": i % 2 == 0},
                "forever": True,
            }
            for i in range(12)
        ]
        ops += [
            {"op": "put", "ns": "pages-sessions", "key": f"user:{i}:session", "value": "s" * 40, "ttlSeconds": 3600}
            for i in range(4)
        ]
        ops += _heartbeat_ops()
        assert client.post("/api/v1/kv", json={"operations": ops}).status_code == 200
        acquires = [{"op": "acquire", "name": "pages.rebalance", "ttlSeconds": 600, "owner": "worker-1:pid-77"}]
        acquires += [
            {"op": "acquire", "name": "pages.render", "ttlSeconds": 900, "owner": f"renderer-{i}", "limit": 3}
            for i in range(2)
        ]
        for op in acquires:
            answer = client.post("/api/v1/locks", json={"operations": [op]})
            assert answer.status_code == 200, answer.text
            assert answer.json()["results"][0]["acquired"], answer.text
        for i in range(5):
            op = {
                "op": "schedule",
                "queue": Q,
                "timerKey": f"pages-reminder-{i}",
                "txn": f"tx-pages-{i}",
                "delayMs": (i + 1) * 600_000,
                "payload": base64.b64encode(json.dumps({"n": i}).encode()).decode(),
            }
            assert client.post("/api/v1/timers", json={"operations": [op]}).status_code == 200
    server.manage("shell", "-c", USERS + AUDIT)


def _heartbeat_ops() -> list[dict[str, Any]]:
    """A consumer's heartbeat as queen-mq 2.6.0's ``supervision()`` writes it."""
    document = {
        "schema": "queen.consumer.status/v1", "instance_id": "5f0c" * 8, "engine": "python",
        "hostname": "worker-3.pages", "pid": 4242, "state": "running", "updated_at_epoch": 0,
        "started_at_epoch": 0, "configuration": {"heartbeat_timeout": 30},
        "pool_status": [{"name": "consumer", "queue": Q, "consumer_group": "fulfillment", "desired": 4,
                         "running": 4, "busy": 1, "completed": 12, "failed": 0}],
    }  # fmt: skip
    raw = json.dumps(document).encode()
    slot = f"pages-app/{'5f0c' * 8}"
    head = {"format": "queen.supervisor.remote-status/v1", "write": "w1", "chunks": 1, "bytes": len(raw)}
    chunk = {"write": "w1", "index": 0, "data": base64.b64encode(raw).decode()}
    return [
        {"op": "put", "ns": "queen-supervisor", "key": f"{slot}/head", "ttlSeconds": 3600, "value": head},
        {"op": "put", "ns": "queen-supervisor", "key": f"{slot}/chunk/0000", "ttlSeconds": 3600, "value": chunk},
    ]


@pytest.fixture(scope="module")
def seeded(dash: Any) -> Any:
    _seed(dash)
    return dash


def _log_in(browser: Any, server: Any, user: str | None) -> tuple[Any, Any]:
    context = browser.new_context(viewport=SIZES["wide"], timezone_id="Europe/Paris")
    if AXE.exists():
        # In every page of the context, before the page's own scripts.
        context.add_init_script(path=str(AXE))
    page = context.new_page()
    page.set_default_timeout(15_000)
    if user is not None:
        page.goto(f"{server.url}/login/")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", "pw")
        page.click("button[type=submit]")
        page.wait_for_load_state()
    return context, page


@pytest.fixture(scope="module")
def pages(browser: Any, seeded: Any) -> Iterator[dict[str, Any]]:
    """One page per kind of visitor, shared by this module: the operator,
    a signed-in user who is not staff, and no one."""
    made = {who: _log_in(browser, seeded, user) for who, user in (("otto", "otto"), ("nico", "nico"), ("anon", None))}
    yield {who: page for who, (_, page) in made.items()}
    for context, _ in made.values():
        context.close()


def _href(page: Any, url: str, link: str) -> str:
    # Links read one after another from the same page: loaded once.
    if page.url != url:
        page.goto(url)
    href = page.locator(link).first.get_attribute("href")
    assert href, f"no {link} on {url}"
    return str(href)


@pytest.fixture(scope="module")
def confirmations(pages: dict[str, Any], seeded: Any) -> dict[str, str]:
    """The action pages, found as an operator finds them: by their links."""
    page, base = pages["otto"], seeded.url
    return {
        "locks-release": _href(page, f"{base}/locks/?name=pages.rebalance", "td.actions a:has-text('Force release')"),
        "timers-move": _href(page, f"{base}/timers/?queue={Q}", "td.actions a:has-text('Move')"),
        "timers-bulk-move": _href(page, f"{base}/timers/?queue={Q}", "#timers-pending a:has-text('Move all')"),
        "kv-edit": _href(page, f"{base}/kv/pages-config/", "td.actions a:has-text('Edit')"),
        "audit-revert": _href(page, f"{base}/audit/?action=kv.edit", "td.actions a:has-text('Revert')"),
        # A message a group holds: its batch, from the leases page, newest first.
        "queue-message": _href(
            page,
            base + _href(page, f"{base}/queues/{Q}/leases/", 'tr[data-lease^="fulfillment/"] a'),
            "#queue-messages td.qa-id a",
        ),
        "queue-recover": _href(page, f"{base}/queues/{Q}/", "#queue-summary td.actions a:has-text('Seek, reset')"),
        "queue-purge": _href(page, f"{base}/queues/{Q}/", "a:has-text('Purge the queue')"),
        "queue-pause": _href(page, f"{base}/queues/{Q}/", "#queue-summary a:has-text('Pause the queue')"),
        "queue-settings": _href(page, f"{base}/queues/{Q}/", "#queue-settings a:has-text('Edit settings')"),
        "queue-push": _href(page, f"{base}/queues/{Q}/", "a:has-text('Push a message')"),
        "queue-create": _href(page, f"{base}/queues/", "a:has-text('Create a queue')"),
    }


#: name -> (who looks, path or the confirmation it is, what the page must show)
PAGES: dict[str, tuple[str, str, str]] = {
    "overview": ("otto", "/", "main h1"),
    "queues": ("otto", "/queues/", "#queue-table tbody tr"),
    "queue": ("otto", f"/queues/{Q}/", "#queue-messages tbody tr"),
    # Paused: the badge, and Resume the queue.
    "queue-dlq": ("otto", f"/queues/{DEAD_Q}/#queue-dlq", "#queue-dlq tbody tr input[type=checkbox]"),
    "queue-leases": ("otto", f"/queues/{Q}/leases/", 'tr[data-lease^="fulfillment/"]'),
    "queue-message": ("otto", "@queue-message", 'tr[data-group="fulfillment"][data-state="leased"] time'),
    "queue-recover": ("otto", "@queue-recover", "form.confirm input[name=do]"),
    "queue-purge": ("otto", "@queue-purge", "form.confirm input[name=confirm]"),
    "queue-pause": ("otto", "@queue-pause", "form.confirm input[name=do]"),
    # Every option a field, with its value and default beside it.
    "queue-settings": ("otto", "@queue-settings", "form.confirm input[name=option-leaseTime]"),
    "queue-push": ("otto", "@queue-push", "form.confirm textarea[name=payload]"),
    "queue-create": ("otto", "@queue-create", "form.confirm input[name=name]"),
    "dlq": ("otto", "/dlq/", "#dlq-table tbody tr input[type=checkbox]"),
    "dlq-by-queue": ("otto", f"/dlq/?queue={DEAD_Q}", "#dlq-table tbody tr input[type=checkbox]"),
    "ephemeral": ("otto", "/ephemeral/", f'tr[data-eph-queue="{EPH_Q}"]'),
    "consumers": ("otto", "/consumers/", "tr[data-consumer]"),
    "attention-thresholds": ("otto", f"/attention/thresholds/?queue={Q}", "form.confirm input[name=max_lag]"),
    "locks": ("otto", "/locks/", 'tr[data-lock^="pages.render#"]'),
    "locks-by-name": ("otto", "/locks/?name=pages.render", 'tr[data-lock^="pages.render#"]'),
    "locks-release": ("otto", "@locks-release", "form.confirm"),
    "timers": ("otto", "/timers/", 'tr[data-timer^="pages-orders/"]'),
    "timers-move": ("otto", "@timers-move", "form.confirm"),
    "timers-filtered": ("otto", f"/timers/?queue={Q}&due_from=-1d&jump=%2B1m", "#timers-pending svg.chart"),
    "timers-bulk-move": ("otto", "@timers-bulk-move", "form.confirm input[name=shift]"),
    "kv": ("otto", "/kv/", "#kv-namespaces tbody tr"),
    "kv-namespace": ("otto", "/kv/pages-config/", 'tr[data-key="feature.flag-3"]'),
    "kv-key": ("otto", "/kv/pages-config/key/feature.flag-1", "pre.value"),
    "kv-edit": ("otto", "@kv-edit", "form.confirm textarea"),
    "kv-lock-permits": ("otto", "/kv/queen-locks/", "#kv-keys tbody tr"),
    "audit": ("otto", "/audit/", "tr[data-entry]"),
    "audit-revert": ("otto", "@audit-revert", "form.confirm"),
    "search": ("otto", "/search/?q=pages", "#search-results tbody tr"),
    "tokens": ("otto", "/tokens/", "tr[data-token]"),
    "not-found": ("otto", "/queues/nosuchqueue/", ".problem"),
    "forbidden": ("nico", "/", ".problem"),
    "two-factor": ("otto", "/account/two-factor/", "main h1"),
    "login": ("anon", "/login/", "form input[name=username]"),
    "api-docs": ("otto", "/api/v1/docs", ".swagger-ui .opblock"),
    "admin": ("otto", "/admin/", "#content-main"),
    "admin-kv": ("otto", "/admin/queenadmin/kventry/", "#result_list tbody tr"),
    "admin-audit": ("otto", "/admin/queenadmin/auditentry/", "#result_list tbody tr"),
}
#: Resolves when every running animation of a finite length has ended
#: (getAnimations() recalculates styles first, so the transitions a scheme
#: switch starts are among them), or after 2 s.
SETTLED = """() => Promise.race([
    Promise.all(document.getAnimations()
        .filter(a => a.playState === "running" && a.effect.getComputedTiming().endTime !== Infinity)
        .map(a => a.finished.catch(() => null))),
    new Promise(done => setTimeout(done, 2000)),
]).then(() => null)"""
#: On a phone, the dashboard's header (top bar and status line) ends this
#: high at most: the page's own content starts in the first screen.
PHONE_HEADER_PX = 120


def _violations(page: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ")),
        }))"""
    )
    return [v for v in found if v["impact"] in BLOCKING]


def _background_luminance(page: Any) -> float:
    rgb = page.evaluate("getComputedStyle(document.body).backgroundColor")
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# CI installs axe-core (.ci/install-system), so there a missing one fails.
@pytest.mark.skipif(not AXE.exists() and not os.environ.get("CI"), reason="needs axe-core: run .ci/install-system")
@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_fits_the_screen_and_passes_axe(name, pages, confirmations, seeded):
    who, where, shown = PAGES[name]
    path = confirmations[where[1:]] if where.startswith("@") else where
    page = pages[who]
    problems = []
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        page.emulate_media(color_scheme="light")
        page.goto(f"{seeded.url}{path}")
        # The API docs draw themselves from the whole OpenAPI document: on a
        # busy machine that takes more than expect's 5 s.
        expect(page.locator(shown).first).to_be_attached(timeout=20_000)
        # The scheme changes colours only (same DOM), so it is switched in
        # place: a reload per scheme would double the time for nothing.
        for scheme in SCHEMES:
            page.emulate_media(color_scheme=scheme)
            # The admin's links fade to their new colour (a CSS transition):
            # the colours checked are the settled ones. (One call that awaits
            # the transitions, not a poll: wait_for_function evaluates a
            # string, which the page's Content-Security-Policy refuses.)
            page.evaluate(SETTLED)
            where_ = f"{name} at {size} in {scheme}"
            luminance = _background_luminance(page)
            if (scheme == "dark") != (luminance < 0.2):
                problems.append(f"{where_}: the page is not drawn {scheme} (background luminance {luminance:.2f})")
            scroll, width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
            if scroll > width:
                problems.append(f"{where_}: {scroll} px wide in a {width} px window (scrolls sideways)")
            if size == "phone" and page.locator("header.topbar").count():
                top = page.evaluate("document.querySelector('main').getBoundingClientRect().top + scrollY")
                if top > PHONE_HEADER_PX:
                    problems.append(f"{where_}: the header takes {top:.0f} px (at most {PHONE_HEADER_PX})")
            problems += [
                f"{where_}: axe {v['impact']} {v['id']} ({v['help']}) at {v['nodes']}" for v in _violations(page)
            ]
            if SHOTS:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"page-{name}-{size}-{scheme}.png"), full_page=True)
    assert not problems, "\n".join(problems)


def test_on_a_phone_a_table_is_cards_with_every_cell_under_its_column_name(pages, seeded):
    page = pages["otto"]
    page.set_viewport_size(SIZES["phone"])
    page.emulate_media(color_scheme="light")
    page.goto(f"{seeded.url}/queues/{Q}/")
    table = page.locator("#queue-messages table.grid")
    expect(table).to_have_class(re.compile(r"\bcards\b"))
    heads = table.locator("thead th").evaluate_all("ths => ths.map(t => t.textContent.replace(/\\s+/g, ' ').trim())")
    row = table.locator("tbody tr").first
    labels = row.locator("td").evaluate_all("cells => cells.map(c => c.dataset.label)")
    assert labels[1:] == heads[1 : len(labels)], (labels, heads)
    # Each label is drawn beside its value; the first cell is the card's title.
    # Waited for: the live region may swap the rows in meanwhile, and a new
    # row is labelled after its swap.
    page.wait_for_function(
        "h => { const c = document.querySelector('#queue-messages table.grid tbody tr td:nth-child(2)');"
        " return c !== null && getComputedStyle(c, '::before').content === h; }",
        arg=f'"{heads[1]}"',
        timeout=10_000,
    )
    # Nothing is off-screen: the box does not scroll and every cell is inside the window.
    box = page.locator("#queue-messages .scroll-x")
    assert box.evaluate("b => b.scrollWidth <= b.clientWidth")
    expect(box).not_to_have_attribute("data-scrolls", "")
    right = row.locator("td").evaluate_all("cells => Math.max(...cells.map(c => c.getBoundingClientRect().right))")
    assert right <= SIZES["phone"]["width"]
    # Screen readers still get a table: roles stand in for what the CSS changed.
    assert table.get_attribute("role") == "table"
    assert row.get_attribute("role") == "row"
    # A lock's Force release, at the end of its row on a wide screen, is on screen here.
    page.goto(f"{seeded.url}/locks/?name=pages.rebalance")
    release = page.locator("td.actions a:has-text('Force release')").first
    expect(release).to_be_in_viewport()
    # At 1440 px the same table is a table again.
    page.set_viewport_size(SIZES["wide"])
    page.goto(f"{seeded.url}/queues/{Q}/")
    # (Retried: a live push may swap the row between finding and reading it.)
    expect(page.locator("#queue-messages tbody tr").first).to_have_css("display", "table-row")


def test_a_table_that_still_scrolls_says_so_and_takes_the_keyboard(pages, seeded):
    page = pages["otto"]
    page.set_viewport_size(SIZES["wide"])
    page.emulate_media(color_scheme="light")
    page.goto(f"{seeded.url}/locks/")
    box = page.locator(".scroll-x").first
    expect(box).not_to_have_attribute("data-scrolls", "")
    # A table wider than its box (as a wide one is in a narrow window), by
    # a style rule: the page's live region may swap the table in meanwhile
    # (the server's own locks renew), and a new table must be as wide.
    # (A rule added through the CSSOM: the page's CSP refuses a style tag.)
    page.evaluate("document.styleSheets[0].insertRule('.scroll-x table { min-width: 3000px; }')")
    page.evaluate("dispatchEvent(new Event('resize'))")
    expect(box).to_have_attribute("data-scrolls", "")
    expect(box).to_have_attribute("tabindex", "0")
    # Read again until it holds: a table the live region swaps in is
    # detached from the page, and a detached box has no computed style.
    cue = "() => getComputedStyle(document.querySelector('.scroll-x'), '::before').content"
    page.wait_for_function(f"({cue})().includes('scrolls sideways')")


def test_the_api_docs_fit_a_phone_in_its_own_width(browser, seeded):
    """A phone lays out a page without a viewport tag 980 px wide."""
    context = browser.new_context(viewport=SIZES["phone"], is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(f"{seeded.url}/api/v1/docs")
        expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
        inner, scroll = page.evaluate("[innerWidth, document.documentElement.scrollWidth]")
        assert inner == SIZES["phone"]["width"], f"laid out {inner} px wide"
        assert scroll <= inner
        # The way back to the dashboard and the theme toggle, as on every page.
        expect(page.locator(".qa-docs-bar a.qa-docs-brand")).to_have_attribute("href", "/")
        expect(page.locator(".qa-docs-bar button.theme-toggle")).to_be_visible()
    finally:
        context.close()


def test_the_theme_toggle_is_remembered_here_and_in_the_admin(browser, seeded):
    context, page = _log_in(browser, seeded, "otto")
    try:
        page.emulate_media(color_scheme="light")
        page.goto(f"{seeded.url}/locks/")
        html = page.locator("html")
        expect(html).to_have_attribute("data-theme", "auto")
        assert _background_luminance(page) > 0.8
        toggle = page.locator("button.theme-toggle")
        expect(toggle).to_have_accessible_name("Toggle theme (current theme: auto)")
        toggle.click()
        expect(html).to_have_attribute("data-theme", "dark")
        expect(toggle).to_have_accessible_name("Toggle theme (current theme: dark)")
        assert _background_luminance(page) < 0.2
        page.goto(f"{seeded.url}/timers/")
        expect(html).to_have_attribute("data-theme", "dark")
        assert _background_luminance(page) < 0.2
        # The API docs follow the same choice.
        page.goto(f"{seeded.url}/api/v1/docs")
        expect(html).to_have_attribute("data-theme", "dark")
        assert _background_luminance(page) < 0.2
        page.goto(f"{seeded.url}/admin/")
        expect(html).to_have_attribute("data-theme", "dark")
        page.locator("button.theme-toggle").click()
        expect(html).to_have_attribute("data-theme", "light")
        page.goto(f"{seeded.url}/")
        expect(html).to_have_attribute("data-theme", "light")
        # Light chosen wins over a dark system.
        page.emulate_media(color_scheme="dark")
        assert _background_luminance(page) > 0.8
        # With a dark system the toggle goes light -> dark -> auto, as the admin's does.
        page.locator("button.theme-toggle").click()
        expect(html).to_have_attribute("data-theme", "dark")
        page.locator("button.theme-toggle").click()
        expect(html).to_have_attribute("data-theme", "auto")
        assert _background_luminance(page) < 0.2
    finally:
        context.close()


def test_the_skip_link_is_the_first_tab_stop_and_lands_on_main(pages, seeded):
    page = pages["otto"]
    page.set_viewport_size(SIZES["wide"])
    page.goto(f"{seeded.url}/timers/")
    skip = page.locator("a.skip-link")
    assert skip.bounding_box()["y"] < 0, "the skip link shows before it is focused"
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    assert skip.bounding_box()["y"] >= 0, "the focused skip link is off screen"
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()
    page.keyboard.press("Tab")
    # The next stop is in the page's content, not back in the header.
    assert page.evaluate("document.activeElement.closest('main') !== null")


def _contrast(a: str, b: str) -> float:
    def lum(rgb: str) -> float:
        def channel(c: float) -> float:
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b_ = (channel(int(x) / 255) for x in re.findall(r"\d+", rgb)[:3])
        return 0.2126 * r + 0.7152 * g + 0.0722 * b_

    high, low = sorted((lum(a), lum(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_nav_focus_ring_shows_on_the_dark_bar(pages, seeded, scheme):
    page = pages["otto"]
    page.set_viewport_size(SIZES["wide"])
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{seeded.url}/locks/")
    link = page.locator("nav.nav a", has_text="Timers")
    # Tab from the link before it: focus-visible is the keyboard's.
    page.locator("nav.nav a", has_text="Locks").focus()
    page.keyboard.press("Tab")
    expect(link).to_be_focused()
    style, width, color = link.evaluate(
        "a => { const s = getComputedStyle(a); return [s.outlineStyle, parseFloat(s.outlineWidth), s.outlineColor]; }"
    )
    bar = page.locator("header.topbar").evaluate("h => getComputedStyle(h).backgroundColor")
    assert style == "solid"
    assert width >= 2
    assert _contrast(color, bar) >= 3, f"focus ring {color} on the bar {bar}"
