"""The inspector in a real browser: Debian's Chromium driven by Playwright, on both stores.

Every flow of issue 27: sign in (by keyboard), read a scope's ranked library
with the cap's cut, open a receipt, restore a fact and see what the gate
did, purge after the confirmation step, the what-if, the regret chart — with
no console error and no failed request — and another user's scope
unreachable, a POST without the CSRF token refused.

The browser is ``/usr/bin/chromium`` (``apt-get install -y chromium``;
Playwright's own browser download is not reachable here). Without it the
tests are skipped; with ``DEERMEM_REQUIRE_BROWSER=1`` (CI, set by
``.ci/run``) they fail instead. With ``DEERMEM_INSPECTOR_SCREENSHOTS=DIR``
each page is saved as a PNG in DIR (docs/inspector.md's pictures).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Page, sync_playwright
from playwright.sync_api import Response as PlaywrightResponse

from ..served_store import ServedStore, on_both_stores
from .conftest import LiveServer, start_server

# Read once, before the tests' own fixture strips DEERMEM_* from the environment.
_REQUIRED = os.environ.get("DEERMEM_REQUIRE_BROWSER", "") not in ("", "0")
_SHOTS = os.environ.get("DEERMEM_INSPECTOR_SCREENSHOTS", "")
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class Browser:
    """A page of a fresh Chromium profile, and what went wrong on it so far."""

    page: Page
    problems: list[str] = field(default_factory=list)

    def watch(self) -> None:
        """Collect console errors and warnings, page errors, failed requests and 4xx/5xx."""

        def console(message: ConsoleMessage) -> None:
            if message.type in ("error", "warning"):
                self.problems.append(f"console {message.type}: {message.text}")

        def answered(response: PlaywrightResponse) -> None:
            if response.status >= 400:
                self.problems.append(f"{response.status}: {response.url}")

        self.page.on("console", console)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on(
            "requestfailed", lambda request: self.problems.append(f"failed: {request.url}")
        )
        self.page.on("response", answered)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    """Chromium with a new empty profile (skipped without it, failed under CI's variable)."""
    if shutil.which(CHROMIUM) is None:
        message = f"Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)"
        if _REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": 1000, "height": 720},
        )
        browser = Browser(context.new_page())
        browser.watch()
        try:
            yield browser
        finally:
            context.close()


@pytest.fixture
def served(store: ServedStore) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    tokens = {"admin": {"admin": True}, "alice": {"users": ["alice"]}}
    live, issued = start_server(
        store, tokens=tokens, max_facts=10, fact_eviction_policy="hybrid-v1"
    )
    for user in ("alice", "bob"):
        memory = live.memory.scoped(user=user, agent="coder")
        made = [
            memory.create_fact(
                f"{user} prefers tool number {n}",
                category="correction" if n == 9 else "preference",
                confidence=0.95 - n / 20,
            )
            for n in range(12)  # two over the cap: two go to the archive
        ]
        first = made[0].fact_id
        assert first is not None
        # a kept fact now ranks lowest: restoring an archived fact sends it away instead
        memory.update_fact(first, confidence=0.05)
    yield live, issued
    live.stop()


def shot(page: Page, name: str) -> None:
    if _SHOTS:
        page.screenshot(path=str(Path(_SHOTS) / f"inspector-{name}.png"))


def sign_in_by_keyboard(page: Page, url: str, token: str) -> None:
    page.goto(f"{url}/ui/")
    assert page.url.endswith("/ui/sign-in")
    shot(page, "sign-in")
    for _ in range(10):  # Tab until the field labelled "Token" has the focus
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "token":
            break
    assert page.get_by_label("Token").evaluate("e => e === document.activeElement")
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{url}/ui/")


@on_both_stores
def test_every_flow_of_the_inspector_in_a_browser(
    browser: Browser, served: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    page = browser.page
    live, issued = served
    url = live.url
    sign_in_by_keyboard(page, url, issued["alice"])

    # the scopes this token may see
    scopes = page.get_by_role("table", name="The scopes this token may see")
    assert scopes.get_by_role("link", name="coder").count() == 1
    assert "bob" not in page.content()
    shot(page, "scopes")

    # a scope's library: ranks, scores, components, the cap's cut, the fact that goes next
    scopes.get_by_role("link", name="coder").click()
    page.wait_for_url(f"{url}/ui/users/alice/agents/coder")
    library = page.locator("table.library")
    ranks = library.locator("tbody tr:not(.cut) td:first-child").all_inner_texts()
    assert ranks == [str(n) for n in range(1, 11)]
    score = library.locator("tbody tr:not(.cut) td:nth-child(2)").first.inner_text()
    assert re.fullmatch(r"\d\.\d{4}", score)
    assert library.locator("meter").count() == 30  # three components per fact (hybrid-v1)
    going = library.locator("tr.next")
    assert going.count() == 1
    assert "goes next" in going.inner_text()
    assert library.locator("tr.cut").count() == 1
    assert "reserved" in library.inner_text()  # the correction holds a reserved slot
    # the regret chart, drawn by the server, with its numbers beside it
    assert page.locator("svg[role=img] title").count() == 1
    assert page.get_by_role("table", name=re.compile("Per policy")).count() == 1
    shot(page, "library")

    # search ranks as Memory.search does
    page.get_by_label("Search").fill("tool number 3")
    page.get_by_label("Search").press("Enter")
    page.wait_for_url(re.compile(r".*\?q=tool"))
    results = page.get_by_role("table", name=re.compile("Search results"))
    assert "alice prefers tool number 3" in results.inner_text()

    # the archive: each row with its receipt; "Why" opens the explanation
    page.get_by_role("link", name="Archive").click()
    page.wait_for_url(f"{url}/ui/users/alice/agents/coder/archive")
    archived = sorted(store.archived("alice", "coder"))
    assert len(archived) == 2
    rows = page.locator("tbody tr")
    assert rows.count() == 2
    assert "capacity" in rows.first.inner_text()
    assert "margin" in rows.first.inner_text()
    shot(page, "archive")
    page.get_by_role("link", name="Why").first.click()
    page.wait_for_url(re.compile(r".*/facts/fact_"))
    assert "Why it left" in page.content()
    assert "below the lowest kept" in page.content()
    shot(page, "why")

    # restore: the gate's result, and which fact left in its place
    page.get_by_role("button", name="Restore").click()
    page.wait_for_url(re.compile(r".*/restore$"))
    status = page.get_by_role("status")
    assert "is back in the library" in status.inner_text()
    assert "let go" in status.inner_text()
    assert page.get_by_role("table", name="What left in its place").count() == 1
    shot(page, "restored")

    # purge, after the confirmation step
    page.goto(f"{url}/ui/users/alice/agents/coder/archive")
    before = store.archived("alice", "coder")
    victim = page.locator("tbody tr").first.locator("td").first.locator("a").inner_text()
    page.get_by_role("link", name=f"Purge {victim}").click()
    assert store.archived("alice", "coder") == before  # nothing yet: a confirmation first
    shot(page, "purge")
    page.get_by_role("button", name=f"Purge {victim} for good").click()
    page.wait_for_url(re.compile(r".*/archive\?purged="))
    assert "was purged" in page.get_by_role("status").inner_text()
    assert victim not in store.archived("alice", "coder")

    # what-if: the other policy's choice beside the active one's
    page.get_by_role("link", name="What if").click()
    page.wait_for_url(f"{url}/ui/users/alice/agents/coder/what-if")
    assert page.get_by_role("table", name=re.compile("would keep instead")).count() == 1
    shot(page, "what-if")

    # regret per user
    page.goto(f"{url}/ui/users/alice")
    assert page.locator("svg[role=img]").count() == 1
    shot(page, "user")

    assert browser.problems == []  # no console error, no failed request

    # another user's scope: "not found", as for a scope that does not exist
    page.goto(f"{url}/ui/users/bob/agents/coder")
    assert page.get_by_role("heading", name="Not found").count() == 1
    assert "bob prefers" not in page.content()
    # the one 404 is the page itself (the browser logs it as a failed load, too)
    assert sorted(browser.problems) == [
        f"404: {url}/ui/users/bob/agents/coder",
        "console error: Failed to load resource: the server responded with a status of 404 "
        "(Not Found)",
    ]
    browser.problems.clear()

    # a POST without the CSRF token is refused and changes nothing
    remaining = sorted(store.archived("alice", "coder"))
    answer = page.request.post(
        f"{url}/ui/users/alice/agents/coder/archive/{remaining[0]}/purge",
        form={"csrf": "not-the-token"},
    )
    assert answer.status == 403
    assert sorted(store.archived("alice", "coder")) == remaining

    # signing out ends the session
    page.goto(f"{url}/ui/")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{url}/ui/sign-in")
    page.goto(f"{url}/ui/")
    assert page.url.endswith("/ui/sign-in")


def test_the_regret_chart_draws_every_label_inside_itself(
    browser: Browser, served: tuple[LiveServer, dict[str, str]]
) -> None:
    """The legend's "confidence (shadow)" ran past the chart's right edge and was cut."""
    page = browser.page
    live, issued = served
    sign_in_by_keyboard(page, live.url, issued["alice"])
    for path in ("/ui/users/alice/agents/coder", "/ui/users/alice"):
        page.goto(f"{live.url}{path}")
        outside = page.evaluate(
            """() => {
                const svg = document.querySelector('svg[role=img]');
                const width = svg.viewBox.baseVal.width;
                return [...svg.querySelectorAll('text')]
                    .filter(t => t.getBBox().x + t.getBBox().width > width)
                    .map(t => t.textContent);
            }"""
        )
        assert outside == [], path
    assert browser.problems == []


def test_the_users_dot_and_dot_dot_open_their_pages_in_a_browser(
    browser: Browser, served: tuple[LiveServer, dict[str, str]]
) -> None:
    """`.` and `..` are user ids (docs/storage.md), yet a browser removes such path segments,
    `%2E%2E` too (URL standard): their links on the scopes page led elsewhere."""
    page = browser.page
    live, issued = served
    for user in (".", ".."):
        live.memory.scoped(user=user, agent="coder").create_fact(f"the fact of user {user}")
    sign_in_by_keyboard(page, live.url, issued["admin"])
    scopes = page.get_by_role("table", name="The scopes this token may see")
    for user in (".", ".."):
        page.goto(f"{live.url}/ui/")
        row = scopes.get_by_role("row").filter(has=page.get_by_role("link", name=user, exact=True))
        row.get_by_role("link", name="coder").click()
        page.wait_for_load_state()
        assert page.get_by_role("heading", name=f"{user} / coder").count() == 1, page.url
        assert f"the fact of user {user}" in page.content()
        page.get_by_role("link", name=user, exact=True).click()  # the user's page
        page.wait_for_load_state()
        assert page.get_by_role("heading", name=f"User {user}").count() == 1, page.url
    assert browser.problems == []


def test_a_bidirectional_override_in_a_query_stays_in_the_query(
    browser: Browser, served: tuple[LiveServer, dict[str, str]]
) -> None:
    """A search for text holding U+202E (RIGHT-TO-LEFT OVERRIDE), which a link can carry,
    drew the rest of the results' caption backwards: the page's own words reversed."""
    page = browser.page
    live, issued = served
    sign_in_by_keyboard(page, live.url, issued["alice"])
    page.goto(f"{live.url}/ui/users/alice/agents/coder?q=%E2%80%AEtool")
    caption = page.get_by_role("table", name=re.compile("Search results")).locator("caption")
    # Where the browser draws "n" and "o" of "not counted": left to right, as written.
    order = caption.evaluate(
        """caption => {
            const walker = document.createTreeWalker(caption, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const at = node.data.indexOf('not counted');
                if (at < 0) continue;
                const left = i => {
                    const range = document.createRange();
                    range.setStart(node, i);
                    range.setEnd(node, i + 1);
                    return range.getBoundingClientRect().left;
                };
                return [left(at), left(at + 1)];
            }
            return null;
        }"""
    )
    assert order is not None
    assert order[0] < order[1], order
    assert browser.problems == []
