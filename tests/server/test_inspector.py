"""The inspector (/ui/) over real HTTP: sessions, CSRF, headers, scopes, on both stores.

What a browser does is tested in tests/server/test_inspector_browser.py; here
the doors are checked request by request: the cookie's flags, the CSRF
refusals (and that they change nothing), the Content-Security-Policy, the
same "not found" for another user's scope as for a scope that does not exist,
and sign-out ending the session on the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from deermem.service.http.ui import SESSIONS_PER_TOKEN, SessionStore

from ..served_store import ServedStore, on_both_stores
from .conftest import LiveServer, start_server

TOKENS = {"admin": {"admin": True}, "alice": {"users": ["alice"]}}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def server(store: ServedStore) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    live, issued = start_server(store, tokens=TOKENS, max_facts=10)
    for user in ("alice", "bob"):
        memory = live.memory.scoped(user=user, agent="coder")
        made = [
            memory.create_fact(f"{user} fact number {n}", confidence=0.95 - n / 20)
            for n in range(11)  # one over the cap: the lowest goes to the archive
        ]
        # a kept fact that now ranks lowest: a restore sends it to the archive instead
        first = made[0].fact_id
        assert first is not None
        memory.update_fact(first, confidence=0.05)
    yield live, issued
    live.stop()


def csrf_of(page: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match is not None, page
    return match.group(1)


def signed_in(live: LiveServer, token: str) -> httpx.Client:
    client = live.client()
    form = client.get("/ui/sign-in")
    answer = client.post("/ui/sign-in", data={"token": token, "csrf": csrf_of(form.text)})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/"
    return client


@on_both_stores
def test_a_token_signs_in_and_sees_its_scopes_only(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    client = signed_in(live, issued["alice"])
    page = client.get("/ui/")
    assert page.status_code == 200
    assert "/ui/users/alice/agents/coder" in page.text
    assert "bob" not in page.text
    admin = signed_in(live, issued["admin"])
    assert "/ui/users/bob/agents/coder" in admin.get("/ui/").text
    # another user's scope is "not found", exactly as a scope that does not exist
    theirs = client.get("/ui/users/bob/agents/coder")
    nobody = client.get("/ui/users/carol/agents/coder")
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.text == nobody.text
    assert "bob fact" not in client.get("/ui/users/bob/agents/coder/archive").text
    assert client.get("/ui/users/bob/agents/coder/what-if").status_code == 404


def test_the_links_to_a_user_id_holding_a_slash_open_her_pages(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    live.memory.scoped(user="org/alice", agent="coder").create_fact("org/alice's one fact")
    admin = signed_in(live, issued["admin"])
    link = "/ui/users/org%2Falice/agents/coder"
    assert link in admin.get("/ui/").text
    for path in ("/ui/users/org%2Falice", link, f"{link}/archive", f"{link}/what-if"):
        assert admin.get(path).status_code == 200, path
    assert "org/alice&#39;s one fact" in admin.get(link).text


def test_a_user_id_that_reads_as_another_is_written_out(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    r"""``ad\u200bmin`` and ``admin`` look alike; the pages write out the hidden character."""
    live, issued = server
    live.memory.scoped(user="ali\u200bce", agent="coder").create_fact("A look-alike's fact")
    admin = signed_in(live, issued["admin"])
    listing = admin.get("/ui/").text
    assert "ali\\u200bce" in listing
    assert "\u200b" not in listing
    for path in ("/ui/users/ali%E2%80%8Bce", "/ui/users/ali%E2%80%8Bce/agents/coder"):
        page = admin.get(path)
        assert page.status_code == 200, path
        assert "ali\\u200bce" in page.text
        assert "\u200b" not in page.text


@pytest.mark.parametrize("page", ["%C2%B2", "x", "-1", "9" * 12])
def test_a_page_number_that_is_no_number_shows_the_first_page(
    server: tuple[LiveServer, dict[str, str]], page: str
) -> None:
    # '²' is a digit to str.isdigit, not to int(): the page shows page 1, as for 'x'.
    live, issued = server
    admin = signed_in(live, issued["admin"])
    scope = "/ui/users/alice/agents/coder"
    for path in (scope, f"{scope}/archive"):
        answer = admin.get(f"{path}?page={page}")
        assert answer.status_code == 200, (path, answer.text[:200])
        assert answer.text == admin.get(path).text, path


def test_the_session_cookie_is_http_only_and_same_site_strict(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    client = live.client()
    form = client.get("/ui/sign-in")
    assert 'for="token">Token</label>' in form.text
    answer = client.post("/ui/sign-in", data={"token": issued["alice"], "csrf": csrf_of(form.text)})
    cookie = next(
        v for k, v in answer.headers.multi_items() if k == "set-cookie" and "deermem_ui=" in v
    )
    flags = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/ui/"} <= flags
    assert "secure" not in flags  # plain HTTP here; Secure comes with TLS
    assert issued["alice"] not in cookie


def test_behind_a_tls_proxy_the_cookie_is_secure(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    # uvicorn trusts the forwarding headers of a proxy on 127.0.0.1: the request came over TLS
    client = live.client()
    client.headers["X-Forwarded-Proto"] = "https"
    form = client.get("/ui/sign-in")
    pre = form.headers["set-cookie"]
    assert "secure" in {part.strip().lower() for part in pre.split(";")}
    # the client talks plain HTTP (the proxy's leg) and so keeps a Secure cookie to itself:
    # it goes along as the proxy would forward it
    nonce = pre.split(";")[0]
    answer = client.post(
        "/ui/sign-in",
        data={"token": issued["alice"], "csrf": csrf_of(form.text)},
        headers={"Cookie": nonce},
    )
    assert answer.status_code == 303
    cookie = next(
        v for k, v in answer.headers.multi_items() if k == "set-cookie" and "deermem_ui=" in v
    )
    assert "secure" in {part.strip().lower() for part in cookie.split(";")}


def test_pages_carry_a_strict_content_security_policy(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    client = signed_in(live, issued["alice"])
    page = client.get("/ui/users/alice/agents/coder")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src" not in policy
    assert "unsafe-inline" not in policy
    assert "<script" not in page.text
    assert "style=" not in page.text
    assert not re.search(r'(src|href)="(https?:)?//', page.text)  # no outside asset
    assert client.get("/ui/static/inspector.css").status_code == 200


def test_a_wrong_or_missing_token_opens_nothing(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    client = live.client()
    assert client.get("/ui/").status_code == 303  # to the sign-in page
    form = client.get("/ui/sign-in")
    answer = client.post(
        "/ui/sign-in", data={"token": issued["alice"] + "x", "csrf": csrf_of(form.text)}
    )
    assert answer.headers["location"] == "/ui/sign-in?failed=1"
    assert "deermem_ui=" not in answer.headers.get("set-cookie", "")
    # a sign-in without the form's token is refused, even with a good token
    assert client.post("/ui/sign-in", data={"token": issued["alice"]}).status_code == 403


@on_both_stores
def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    server: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    live, issued = server
    client = signed_in(live, issued["alice"])
    archived = store.archived("alice", "coder")
    assert len(archived) == 1
    (fact_id,) = archived
    base = f"/ui/users/alice/agents/coder/archive/{fact_id}"
    for path in (f"{base}/restore", f"{base}/purge"):
        assert client.post(path, data={}).status_code == 403
        assert client.post(path, data={"csrf": "forged"}).status_code == 403
    assert store.archived("alice", "coder") == archived
    # with the token, the restore goes through the gate and says what left
    token = csrf_of(client.get("/ui/users/alice/agents/coder/archive").text)
    restored = client.post(f"{base}/restore", data={"csrf": token})
    assert restored.status_code == 200
    assert f"{fact_id} is back in the library" in restored.text or "evicted" in restored.text
    assert store.archived("alice", "coder") != archived


@on_both_stores
def test_the_purged_notice_is_shown_only_for_a_fact_really_purged(
    server: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    """The archive page printed "<any text> was purged" from its `?purged=` parameter, so a
    link could claim an active fact, or anything, was purged."""
    live, issued = server
    client = signed_in(live, issued["alice"])
    scope = "/ui/users/alice/agents/coder"
    (archived,) = store.archived("alice", "coder")
    active = next(iter(store.facts("alice", "coder")))
    notice = 'class="notice"'
    for claimed in (active, archived, "fact_neverhere", "All of your memories", ""):
        page = client.get(f"{scope}/archive", params={"purged": claimed})
        assert page.status_code == 200
        assert notice not in page.text, claimed
        assert "was purged" not in page.text, claimed
    token = csrf_of(client.get(f"{scope}/archive/{archived}/purge").text)
    purged = client.post(f"{scope}/archive/{archived}/purge", data={"csrf": token})
    assert purged.status_code == 303
    assert purged.headers["location"] == f"{scope}/archive?purged={archived}"
    page = client.get(purged.headers["location"])
    assert notice in page.text
    assert f"{archived} was purged" in page.text
    # the same link, followed by a token of another user, is another scope's "not found"
    bob = client.get(f"/ui/users/bob/agents/coder/archive?purged={archived}")
    assert bob.status_code == 404


def test_signing_out_ends_the_session_on_the_server(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    client = signed_in(live, issued["alice"])
    cookie = client.cookies.get("deermem_ui")
    token = csrf_of(client.get("/ui/").text)
    assert client.post("/ui/sign-out", data={"csrf": token}).status_code == 303
    replay = live.client()
    replay.cookies.set("deermem_ui", cookie or "", domain="127.0.0.1", path="/ui/")
    assert replay.get("/ui/").status_code == 303  # the old cookie opens nothing


def test_a_revoked_token_ends_its_sessions(server: tuple[LiveServer, dict[str, str]]) -> None:
    live, issued = server
    client = signed_in(live, issued["alice"])
    assert client.get("/ui/").status_code == 200
    record = next(r for r in live.tokens.records() if r.users == ("alice",))
    live.tokens.revoke(record.token_id)
    assert client.get("/ui/").status_code == 303


def _session_files(directory: Path) -> list[Path]:
    return sorted((directory / "ui-sessions").rglob("*.json"))


def test_sessions_expire_are_pruned_and_hold_no_token(tmp_path: Path) -> None:
    clock = Clock()
    sessions = SessionStore(tmp_path, clock)
    first = sessions.create("0123456789ab")
    assert sessions.get(first.session_id) == first
    files = _session_files(tmp_path)
    assert [path.name for path in files] == [
        hashlib.sha256(first.session_id.encode()).hexdigest() + ".json"
    ]
    assert first.session_id not in files[0].read_text()
    assert "0123456789ab" not in str(files[0].relative_to(tmp_path))
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    clock.now += timedelta(hours=13)
    assert sessions.get(first.session_id) is None  # expired, and its record gone
    stale = sessions.create(None)
    other = sessions.create("another-token")
    clock.now += timedelta(hours=13)
    # a sign-in prunes the records of its token's expired sessions, and (once an hour at
    # most) every token's
    sessions.create(None)
    for gone in (stale, other):
        path = sessions._path(gone.session_id)
        assert path is not None
        assert not path.exists()
    assert len(_session_files(tmp_path)) == 1
    # the pre-session token is an HMAC under one key the workers share
    again = SessionStore(tmp_path, clock)
    assert again.pre_session_token("nonce") == sessions.pre_session_token("nonce")
    assert sessions.pre_session_token("nonce") != sessions.pre_session_token("other")


def test_a_token_holds_a_bounded_number_of_sessions_and_signing_in_reads_only_its_own(
    tmp_path: Path,
) -> None:
    """One token could open sessions without bound, and each sign-in (anyone's) read every
    session file of the server: the cost grew with the pile."""
    clock = Clock()
    sessions = SessionStore(tmp_path, clock)
    crowd = [sessions.create(f"token-{n}") for n in range(50)]
    made = []
    for _ in range(SESSIONS_PER_TOKEN + 5):
        clock.now += timedelta(seconds=1)
        made.append(sessions.create("alice-token"))
    # the oldest went, the newest remain; other tokens' sessions are untouched
    assert [sessions.get(s.session_id) is not None for s in made] == [False] * 5 + [
        True
    ] * SESSIONS_PER_TOKEN
    assert all(sessions.get(s.session_id) is not None for s in crowd)
    assert len(_session_files(tmp_path)) == 50 + SESSIONS_PER_TOKEN
    # a sign-in reads its own token's records, never the crowd's
    read: list[Path] = []
    real = Path.read_bytes

    def reading(path: Path) -> bytes:
        read.append(path)
        return real(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "read_bytes", reading)
        sessions.create("bob-token")
        clock.now += timedelta(seconds=1)
        sessions.create("alice-token")
    crowd_files = {sessions._path(s.session_id) for s in crowd}
    assert not crowd_files & set(read)
    assert len(read) <= SESSIONS_PER_TOKEN + 1


def test_signing_in_again_ends_the_browsers_previous_session(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    client = signed_in(live, issued["alice"])
    before = client.cookies.get("deermem_ui")
    form = client.get("/ui/sign-in")
    answer = client.post("/ui/sign-in", data={"token": issued["alice"], "csrf": csrf_of(form.text)})
    assert answer.status_code == 303
    assert client.cookies.get("deermem_ui") != before
    replay = live.client()
    replay.cookies.set("deermem_ui", before or "", domain="127.0.0.1", path="/ui/")
    assert replay.get("/ui/").status_code == 303  # the earlier session opens nothing


# Markup in everything a user or a model wrote that the inspector shows: the
# content, an `other` category's label, topics, the correction a fact carries,
# and the search box's own query.
_HOSTILE = (
    '<script>alert("content")</script>',
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(2)>',
)


@on_both_stores
def test_markup_a_user_or_a_model_wrote_is_shown_as_text_on_every_page(
    store: ServedStore,
) -> None:
    live, issued = start_server(store, tokens=TOKENS, max_facts=10)
    try:
        memory = live.memory.scoped(user="alice", agent="coder")
        made = [
            memory.create_fact(
                f"{_HOSTILE[0]} number {n}",
                category=_HOSTILE[1] if n else "preference",
                confidence=0.9 - n / 20,
                topics=[_HOSTILE[2]],
                source_error=_HOSTILE[2] if n == 0 else None,
            )
            for n in range(11)  # one over the cap: the lowest goes to the archive
        ]
        active = made[0].fact_id
        assert active is not None
        assert made[10].fact_id is None  # the last one was refused entry
        archived = memory.list_archived()[0].fact_id
        client = signed_in(live, issued["alice"])
        scope = "/ui/users/alice/agents/coder"
        pages = [
            "/ui/",
            "/ui/users/alice",
            scope,
            f"{scope}?q={_HOSTILE[1]}",
            f"{scope}?q={_HOSTILE[0]}",
            f"{scope}/archive",
            f"{scope}/archive?purged={_HOSTILE[2]}",
            f"{scope}/facts/{active}",
            f"{scope}/facts/{archived}",
            f"{scope}/archive/{archived}/purge",
            f"{scope}/what-if",
        ]
        for path in pages:
            page = client.get(path)
            assert page.status_code == 200, path
            for text in _HOSTILE:
                assert text not in page.text, (path, text)
            assert "<script" not in page.text, path
            assert "<img" not in page.text, path
        shown = client.get(f"{scope}/facts/{active}").text
        assert "&lt;script&gt;" in shown  # shown, as text
    finally:
        live.stop()


@on_both_stores
def test_at_a_full_library_the_page_names_what_the_gate_evicts_next(store: ServedStore) -> None:
    # cap 11 holds ceil(10 % of 11) = 2 slots for corrections, both taken
    live, issued = start_server(
        store, tokens=TOKENS, max_facts=11, fact_eviction_policy="hybrid-v1"
    )
    try:
        memory = live.memory.scoped(user="alice", agent="coder")
        for n in (1, 2):
            memory.create_fact(
                f"correction {n}", category="correction", confidence=0.1, fact_id=f"corr{n}"
            )
        for n in range(9):
            memory.create_fact(
                f"preference {n}", category="preference", confidence=0.8, fact_id=f"p{n}"
            )
        page = signed_in(live, issued["alice"]).get("/ui/users/alice/agents/coder").text
        assert "2 slots reserved for corrections" in page
        assert page.count(">reserved</strong>") == 2
        going = re.search(r"Goes next when a fact needs room: <a [^>]*>(\w+)</a>", page)
        assert going is not None
        assert going[1].startswith("p")  # a preference, above the reserved corrections
        made = memory.create_fact("a new strong fact", category="preference", confidence=0.95)
        assert made.evicted == (going[1],)
        assert [receipt.reserved_correction_slots for receipt in made.receipts] == [2]
        keeps = memory.what_if().active_keeps  # the what-if keeps what the gate kept
        assert set(keeps) == {fact.id for fact in memory.list_facts()}
        # It scored above the reserved corrections: the Why page says so, as the CLI does,
        # not "… below the lowest fact kept" with a negative number.
        [line] = made.receipts[0].evicted
        assert line.margin is not None
        assert line.margin < 0
        page_of = f"/ui/users/alice/agents/coder/facts/{going[1]}"
        why = signed_in(live, issued["alice"]).get(page_of)
        expected = f"{-line.margin:.4f} above the lowest kept (a reserved correction held its slot)"
        assert expected in why.text
        assert "below" not in why.text
    finally:
        live.stop()


def test_the_why_page_keeps_its_sentences_apart(
    server: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    """The receipt's sentence ended "cap 10." and the rank's began right after it: a block
    tag closed the line, and the template's trim_blocks took the newline that was the space."""
    live, issued = server
    (archived,) = store.archived("alice", "coder")
    page = signed_in(live, issued["alice"]).get(f"/ui/users/alice/agents/coder/facts/{archived}")
    text = re.sub(r"<[^>]+>", "", page.text)
    assert re.search(r"cap 10\. It ranked \d+ with score", text), text


def test_a_restore_the_gate_undoes_lists_nothing_as_left_in_its_place(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    """The restored fact, evicted again at once, was listed under "What left in its place"."""
    live, issued = server
    memory = live.memory.scoped(user="carol", agent="coder")
    for n in range(11):  # the lowest goes to the archive, and still ranks lowest there
        memory.create_fact(f"carol fact number {n}", confidence=0.95 - n / 20)
    (archived,) = [entry.fact_id for entry in memory.list_archived()]
    client = signed_in(live, issued["admin"])
    scope = "/ui/users/carol/agents/coder"
    token = csrf_of(client.get(f"{scope}/archive").text)
    answer = client.post(f"{scope}/archive/{archived}/restore", data={"csrf": token})
    assert answer.status_code == 200
    assert f"The gate evicted {archived} again" in answer.text
    assert "What left in its place" not in answer.text
    assert [entry.fact_id for entry in memory.list_archived()] == [archived]


def test_a_page_over_a_damaged_file_is_logged_with_the_file_and_its_request_id(
    server: tuple[LiveServer, dict[str, str]],
    store: ServedStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The page says the server's log names the file; the inspector's line named none."""
    live, issued = server
    damaged = _damage_a_fact_of(store, "alice")
    client = signed_in(live, issued["alice"])
    with caplog.at_level("ERROR", logger="deermem.service.ui"):
        page = client.get("/ui/users/alice/agents/coder")
    assert page.status_code == 500
    assert "the server&#39;s log names the file" in page.text
    request_id = page.headers["x-request-id"]
    assert f"Request id {request_id}" in page.text
    [line] = [record.getMessage() for record in caplog.records]
    assert str(damaged) in line
    assert "front matter" in line


def _damage_a_fact_of(store: ServedStore, user: str) -> Path:
    """Break one of a user's fact files by hand, as an editor saves it (aside, renamed)."""
    damaged = next((store.root / "users" / user).rglob("fact_*.md"))
    edited = damaged.with_name("edited.tmp")
    edited.write_text("---\nid: x\ncontent: [unclosed\n")
    edited.replace(damaged)
    # The server's cache holds the scope until the user's manifest changes: a hand edit
    # is seen by the next process, or here once the manifest's time moves on.
    manifest = store.root / "users" / user / "memory.json"
    later = manifest.stat().st_mtime_ns + 1_000_000_000
    os.utime(manifest, ns=(later, later))
    return damaged


def test_one_users_damaged_file_leaves_the_others_scopes_page_whole(
    server: tuple[LiveServer, dict[str, str]],
    store: ServedStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The scopes page counted every scope of the store, then kept the token's: bob's
    damaged file made it a 500 for alice, and told her some memory was damaged."""
    live, issued = server
    _damage_a_fact_of(store, "bob")
    alice = signed_in(live, issued["alice"])
    with caplog.at_level("ERROR", logger="deermem.service.ui"):
        page = alice.get("/ui/")
    assert page.status_code == 200
    assert "/ui/users/alice/agents/coder" in page.text
    assert "bob" not in page.text
    assert "corrupt" not in page.text.lower()
    assert not caplog.records  # bob's scope was not even read
    # the admin sees every scope: bob's as a row that cannot be read, the rest as ever
    with caplog.at_level("ERROR", logger="deermem.service.ui"):
        admin = signed_in(live, issued["admin"]).get("/ui/")
    assert admin.status_code == 200
    rows = re.findall(r"<tr>(.*?)</tr>", admin.text, flags=re.S)
    bob = next(row for row in rows if "/ui/users/bob/agents/coder" in row)
    assert "Stored memory is corrupt" in bob
    alices = next(row for row in rows if "/ui/users/alice/agents/coder" in row)
    assert re.search(r'<td class="num">10</td><td class="num">1</td>', alices), alices
    assert len(caplog.records) == 1  # the operator's line, with the file


def test_the_regret_panels_by_day_show_the_policy_the_scope_runs_now(store: ServedStore) -> None:
    """A scope that evicted under `confidence` and runs `hybrid-v1` now: the page's "by day,
    active policy" table and the chart's events panel showed `confidence`, first by name."""
    before = store.unscoped(store.config(max_facts=10, fact_eviction_policy="confidence"))
    old = before.scoped(user="alice", agent="coder")
    for n in range(11):  # one eviction under confidence
        old.create_fact(f"old fact {n}", confidence=0.9 - n / 20)
    live, issued = start_server(
        store, tokens=TOKENS, max_facts=10, fact_eviction_policy="hybrid-v1"
    )
    try:
        memory = live.memory.scoped(user="alice", agent="coder")
        for n in range(5):  # five evictions under hybrid-v1, and three restores
            memory.create_fact(f"new fact {n}", confidence=0.95)
        for entry in memory.list_archived()[:3]:
            memory.restore(entry.fact_id)
        hybrid = memory.regret().policy("hybrid-v1", "active")
        assert hybrid is not None
        assert hybrid.timeline
        client = signed_in(live, issued["alice"])
        for path in ("/ui/users/alice/agents/coder", "/ui/users/alice"):
            page = client.get(path).text
            table = page[
                page.index("<caption>By day") : page.index("</table>", page.index("By day"))
            ]
            assert "active policy hybrid-v1" in table, path
            last = re.findall(r'<tr><th scope="row">(.*?)</tr>', table)[-1]
            cells = re.findall(r'<td class="num">(\d+)</td>', last)
            point = hybrid.timeline[-1]
            assert cells[:2] == [str(point.evictions), str(point.regretted)], path
            title = re.search(r"<title[^>]*>(.*?)</title>", page[page.index("<svg") :])
            assert title is not None
            assert "under the active policy hybrid-v1" in title[1], path
    finally:
        live.stop()


@on_both_stores
def test_a_restore_or_purge_sent_twice_says_where_the_fact_is(
    server: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    """A reloaded or double-clicked Restore answered "Not found … nothing this token may see"
    while the fact sat in the library; a second Purge the same."""
    live, issued = server
    client = signed_in(live, issued["alice"])
    scope = "/ui/users/alice/agents/coder"
    (archived,) = store.archived("alice", "coder")
    token = csrf_of(client.get(f"{scope}/archive").text)
    assert client.post(f"{scope}/archive/{archived}/restore", data={"csrf": token}).is_success
    again = client.post(f"{scope}/archive/{archived}/restore", data={"csrf": token})
    assert again.status_code == 404
    assert f"{archived} is not in the archive: it is in the library" in again.text
    assert "nothing this token may see" not in again.text
    (evicted,) = store.archived("alice", "coder")  # the fact that left in its place
    for _ in range(2):
        purged = client.post(f"{scope}/archive/{evicted}/purge", data={"csrf": token})
    assert purged.status_code == 404
    assert f"{evicted} is not in the archive: it was purged" in purged.text
    # an id the scope never held is "not found", as before
    never = client.post(f"{scope}/archive/fact_00000000/restore", data={"csrf": token})
    assert never.status_code == 404
    assert "nothing this token may see" in never.text


def test_the_escape_of_the_dot_users_opens_them_and_nothing_else(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, issued = server
    live.memory.scoped(user="..", agent="coder").create_fact("the dot-dot user's fact")
    admin = signed_in(live, issued["admin"])
    link = "/ui/users/%00../agents/coder"
    assert link in admin.get("/ui/").text
    assert "the dot-dot user&#39;s fact" in admin.get(link).text
    # the escape is for `.` and `..` only; another user's token still finds nothing there
    nobody = admin.get("/ui/users/%00alice/agents/coder")
    assert nobody.status_code == 404
    alice = signed_in(live, issued["alice"])
    theirs = alice.get(link)
    assert theirs.status_code == 404
    assert theirs.text == alice.get("/ui/users/carol/agents/coder").text


def test_a_restore_the_gate_undoes_says_where_the_fact_stood_as_its_receipt_does(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    """A reserved correction kept its slot with a lower score than the restored fact, and
    the page said the fact "ranks below every fact kept"; it now says the receipt's words."""
    live, issued = server
    memory = live.memory.scoped(user="carol", agent="coder")
    memory.create_fact("carol prefers tabs", category="preference", confidence=0.5)
    for n in range(9):
        memory.create_fact(f"carol preference number {n}", category="preference", confidence=0.9)
    # cap 10, one slot reserved: the correction stays, the 0.5 preference goes
    memory.create_fact("carol: never pip, always uv", category="correction", confidence=0.3)
    (archived,) = [entry.fact_id for entry in memory.list_archived()]
    client = signed_in(live, issued["admin"])
    scope = "/ui/users/carol/agents/coder"
    token = csrf_of(client.get(f"{scope}/archive").text)
    answer = client.post(f"{scope}/archive/{archived}/restore", data={"csrf": token})
    assert answer.status_code == 200
    text = re.sub(r"<[^>]+>", "", answer.text)
    assert "below every fact kept" not in text
    said = re.search(
        rf"The gate evicted {archived} again: it ranked 10 with score [^,]+, ([^.]+\.\d+[^.]*)\.",
        text,
    )
    assert said is not None, text
    assert said[1].endswith(
        "above the lowest kept (a reserved correction held its slot), so it is back in the archive"
    )
    why = re.sub(r"<[^>]+>", "", client.get(f"{scope}/facts/{archived}").text)
    assert "above the lowest kept (a reserved correction held its slot)" in why
    library = re.sub(r"<[^>]+>", "", client.get(scope).text)
    assert "10 facts, 1 slot reserved for corrections." in library  # not "1 slots"


def _edit_the_receipts_of(
    store: ServedStore, user: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    """Change each receipt line of a user's coder scope by hand, as an editor would."""
    audit = store.root / "users" / user / "agents" / "coder" / ".metadata" / "eviction-audit.json"
    receipts = json.loads(audit.read_text())
    for receipt in receipts:
        for line in receipt["evicted"]:
            edit(line)
    audit.write_text(json.dumps(receipts))
    manifest = store.root / "users" / user / "memory.json"
    later = manifest.stat().st_mtime_ns + 1_000_000_000
    os.utime(manifest, ns=(later, later))


def test_a_receipt_line_without_a_score_is_explained_not_a_500(
    server: tuple[LiveServer, dict[str, str]], store: ServedStore
) -> None:
    """A hand-edited receipt whose line kept its rank but lost its score (not a number)
    made the Why page a 500: the template formatted the missing score."""
    live, issued = server
    (archived,) = store.archived("alice", "coder")
    _edit_the_receipts_of(store, "alice", lambda line: line.update(score="high"))
    page = signed_in(live, issued["alice"]).get(f"/ui/users/alice/agents/coder/facts/{archived}")
    assert page.status_code == 200, page.text
    text = re.sub(r"<[^>]+>", "", page.text)
    assert re.search(r"It ranked 11, \d\.\d{4} below the lowest kept\.", text), text


def test_a_deleted_fact_is_said_to_have_left_by_no_ranking(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    """The Why page of a deleted fact read "It was not a ranking (a deleted)."."""
    live, issued = server
    memory = live.memory.scoped(user="alice", agent="notes")
    made = memory.create_fact("alice keeps her notes short").fact_id
    assert made is not None
    memory.delete_fact(made)
    page = signed_in(live, issued["alice"]).get(f"/ui/users/alice/agents/notes/facts/{made}")
    assert page.status_code == 200
    assert "No ranking decided it (reason: deleted)." in page.text


@on_both_stores
def test_a_scope_that_does_not_exist_reads_as_another_users_on_every_page(
    server: tuple[LiveServer, dict[str, str]],
) -> None:
    """Another user's scope said "nothing is at this path" (the API's sentence) where a
    scope that does not exist said "There is nothing here…", and the archive and what-if
    of a scope that does not exist were pages (an empty archive, a what-if of 0 facts)."""
    live, issued = server
    alice = signed_in(live, issued["alice"])
    for page in ("", "/archive", "/what-if"):
        theirs = alice.get(f"/ui/users/bob/agents/coder{page}")
        nothing = alice.get(f"/ui/users/alice/agents/nosuch{page}")
        assert theirs.status_code == nothing.status_code == 404, page
        assert theirs.text == nothing.text, page
        assert "nothing this token may see" in nothing.text
    # a scope that exists, even with nothing in its archive, is a page as before
    assert alice.get("/ui/users/alice/agents/coder/what-if").status_code == 200


def test_a_tokens_file_broken_after_start_is_the_inspectors_page_not_json(
    server: tuple[LiveServer, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """A signed-in page, a form and the sign-in answered the API's JSON problem (a browser
    showed raw JSON); they are now the inspector's page, its request id that of the line."""
    live, issued = server
    client = signed_in(live, issued["alice"])
    token = csrf_of(client.get("/ui/").text)
    fresh = live.client()
    sign_in_token = csrf_of(fresh.get("/ui/sign-in").text)
    live.tokens.path.write_text("{broken", "utf-8")
    with caplog.at_level("ERROR", logger="deermem.service.ui"):
        answers = [
            client.get("/ui/"),
            client.post("/ui/sign-out", data={"csrf": token}),
            fresh.post("/ui/sign-in", data={"token": issued["alice"], "csrf": sign_in_token}),
        ]
    for answer in answers:
        assert answer.status_code == 500
        assert answer.headers["content-type"].startswith("text/html"), answer.text
        assert "<h1>Server misconfigured</h1>" in answer.text
        assert f"Request id {answer.headers['x-request-id']}" in answer.text
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3
    assert all(str(live.tokens.path) in line for line in lines)


@pytest.mark.parametrize("past", ["2", "99"])
def test_a_page_number_past_the_last_shows_the_last(
    server: tuple[LiveServer, dict[str, str]], past: str
) -> None:
    """?page=2 of a one-page library or archive showed an empty table ("page 4 of 3"
    when there were more)."""
    live, issued = server
    admin = signed_in(live, issued["admin"])
    scope = "/ui/users/alice/agents/coder"
    for path in (scope, f"{scope}/archive"):
        answer = admin.get(f"{path}?page={past}")
        assert answer.status_code == 200, path
        assert answer.text == admin.get(path).text, path


def test_the_regret_table_by_day_says_when_it_shows_only_the_last_30_days(
    store: ServedStore,
) -> None:
    """The table showed the last 30 days of a longer timeline under the caption "By day",
    beside a chart of every day whose caption said "the numbers are in the tables"."""
    days = iter(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n) for n in range(1000))
    config = store.config(max_facts=10, fact_eviction_policy="hybrid-v1")
    old = store.memory(config, user="alice", agent="coder", clock=lambda: next(days))
    for n in range(50):  # from the eleventh on, one eviction a day
        old.create_fact(f"alice fact number {n}", confidence=0.5)
    timeline = old.regret().policy("hybrid-v1", "active")
    assert timeline is not None
    assert len(timeline.timeline) == 40
    live, issued = start_server(store, tokens=TOKENS, max_facts=10)
    try:
        page = signed_in(live, issued["alice"]).get("/ui/users/alice/agents/coder").text
        caption = re.search(r"<caption>By day[^<]*</caption>", page)
        assert caption is not None
        assert "the last 30 of its 40 days" in caption[0]
        table = page[caption.end() : page.index("</table>", caption.end())]
        assert len(re.findall(r'<tr><th scope="row">', table)) == 30
        assert "the numbers are in the tables" not in page
    finally:
        live.stop()
