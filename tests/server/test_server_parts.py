"""The framework-free parts: the tokens file, cursors, problem mapping; and the protocol
the workers run."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import socket
import stat
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.server import ServerState

from deermem import FactValidationError
from deermem.errors import DuplicateFactError, MessageFormatError, OwnerConflictError
from deermem.service.errors import TokenFileError, UnknownTokenError
from deermem.service.http.routes import (
    USER_PATH_PREFIXES,
    InvalidCursor,
    UserSegmentMiddleware,
    paginate,
)
from deermem.service.http.run import ServerHTTPProtocol
from deermem.service.problems import operator_note, problem_for
from deermem.service.settings import HostRule, is_loopback, split_host
from deermem.service.tokens import TokenFile

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_tokens_are_stored_hashed_and_bound_to_users(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "state" / "tokens.json")
    assert tokens.records() == ()
    assert not tokens.configured()
    issued = tokens.add(users=["alice", "alice", "bob"], name="laptop", now=NOW)
    text = tokens.path.read_text()
    assert issued.token not in text
    assert issued.token.split("_", 2)[2] not in text
    assert stat.S_IMODE(tokens.path.stat().st_mode) == 0o600
    record = json.loads(text)["tokens"][0]
    assert record["users"] == ["alice", "bob"]
    assert record["name"] == "laptop"
    principal = tokens.authenticate(issued.token, now=NOW)
    assert principal is not None
    assert principal.may_address("bob")
    assert not principal.may_address("carol")
    assert not principal.may_address("Alice")
    assert tokens.authenticate(issued.token + "x", now=NOW) is None
    assert tokens.authenticate("dmt_" + record["id"] + "_" + "A" * 43, now=NOW) is None
    admin = tokens.add(admin=True, now=NOW)
    assert tokens.authenticate(admin.token, now=NOW).may_address("anyone")  # type: ignore[union-attr]
    assert tokens.revoke(record["id"]).users == ("alice", "bob")
    assert tokens.authenticate(issued.token, now=NOW) is None
    with pytest.raises(UnknownTokenError, match="no token with id"):
        tokens.revoke(record["id"])
    with pytest.raises(ValueError, match="--admin"):
        tokens.add(now=NOW)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"version": 1}', "expected"),
        ('{"version": 2, "tokens": []}', "version 2"),
        ('{"version": 1, "tokens": [{"id": "zz"}]}', "tokens[0].id"),
        (
            '{"version": 1, "tokens": [{"id": "0123456789ab", "sha256": "' + "0" * 64 + '", '
            '"users": "alice"}]}',
            "tokens[0].users",
        ),
    ],
)
def test_a_damaged_tokens_file_is_an_error_never_no_tokens(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    tokens = TokenFile(path)
    with pytest.raises(TokenFileError, match=re.escape(problem)):
        tokens.configured()
    with pytest.raises(TokenFileError):
        tokens.add(users=["alice"], now=NOW)
    assert path.read_text() == content  # not overwritten


@given(
    ids=st.lists(st.integers(0, 50), unique=True, max_size=30),
    limit=st.integers(1, 7),
    removed=st.sets(st.integers(0, 50)),
    descending=st.booleans(),
)
def test_a_cursor_walk_never_repeats_or_skips_what_stays(
    ids: list[int], limit: int, removed: set[int], descending: bool
) -> None:
    items = [f"fact_{n:04d}" for n in ids]
    first = paginate(items, lambda i: (i,), limit=limit, cursor=None, descending=descending)
    seen = list(first.items)
    # Between pages, items disappear: the walk still covers everything that stays, once.
    remaining = [i for i in items if int(i[5:]) not in removed or i in seen]
    cursor = first.next_cursor
    while cursor is not None:
        page = paginate(
            remaining, lambda i: (i,), limit=limit, cursor=cursor, descending=descending
        )
        assert len(page.items) <= limit
        seen += page.items
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert sorted(seen) == sorted(remaining)
    assert seen == sorted(seen, reverse=descending)


@pytest.mark.parametrize("cursor", ["", "!!!", "bm90IGpzb24", "WzFd"])  # "", junk, text, [1]
def test_a_cursor_the_server_did_not_issue_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        paginate(["a", "b"], lambda i: (i,), limit=1, cursor=cursor)


def test_problems_carry_fields_never_values() -> None:
    secret = "my bank PIN is 1234"
    fact = problem_for(FactValidationError("content", secret, "expected at most 10 characters"))
    assert fact.status == 422
    assert fact.extensions["field"] == "content"
    message = problem_for(MessageFormatError(3, "content", secret, "expected text"))
    assert message.extensions["index"] == 3
    for problem in (fact, message):
        assert secret not in json.dumps(problem.body())


def test_a_directory_of_another_owner_is_a_conflict_the_client_sees_and_the_log_names() -> None:
    error = OwnerConflictError("/store/users/alice", "its owner record names another user id")
    problem = problem_for(error)
    assert (problem.status, problem.slug) == (409, "owner-conflict")
    assert "/store/users/alice" not in json.dumps(problem.body())
    note = operator_note(error, problem)
    assert note is not None
    assert "/store/users/alice" in note
    duplicate = DuplicateFactError("fact_1")
    assert operator_note(duplicate, problem_for(duplicate)) is None


SERVICE = Path(__file__).resolve().parents[2] / "src" / "deermem" / "service"
SERVER_DOC = SERVICE.parents[2] / "docs" / "server.md"


def defined_problem_types() -> dict[str, set[int]]:
    """Every problem type the service builds (``Problem(status, "slug", …)``: problems are
    the service's alone), with its statuses (none for a status decided at run time)."""
    defined: dict[str, set[int]] = {}
    for path in SERVICE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Problem"):
                continue
            status, slug = node.args[:2]
            assert isinstance(slug, ast.Constant), f"{path}:{node.lineno}: a slug is a literal"
            statuses = defined.setdefault(str(slug.value), set())
            if isinstance(status, ast.Constant) and isinstance(status.value, int):
                statuses.add(status.value)
    return defined


def documented_problem_types() -> dict[str, set[int]]:
    """The Errors table of docs/server.md: each type named in a row, with the row's statuses."""
    section = SERVER_DOC.read_text("utf-8").split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, set[int]] = {}
    for row in section.splitlines():
        cells = row.split(" | ")
        if not row.startswith("| ") or len(cells) < 3 or not cells[0][2:3].isdigit():
            continue
        statuses = {int(status) for status in re.findall(r"\d{3}", cells[0])}
        for name in re.findall(r"`([^`]+)`", cells[1]):
            if re.fullmatch(r"[a-z]+(-[a-z]+)*", name):
                documented.setdefault(name, set()).update(statuses)
    return documented


def test_the_errors_table_names_every_problem_type_the_server_sends() -> None:
    """svc-05: a client branches on `type`; the table lists each one the code can send, with
    its status, and none it cannot."""
    defined = defined_problem_types()
    documented = documented_problem_types()
    assert sorted(documented) == sorted(defined)
    for slug, statuses in defined.items():
        assert statuses <= documented[slug], slug


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),  # a name may resolve to anything
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@given(
    host=st.one_of(
        st.text(max_size=40),
        st.builds(
            "{}:{}".format,
            st.sampled_from(["localhost", "127.0.0.1", "[::1]", "memory.test", "evil.test"]),
            st.integers(0, 99_999),
        ),
    )
)
def test_a_host_header_passes_only_as_a_loopback_or_configured_name(host: str) -> None:
    """Whatever a client sends as Host, the rule answers (never raises), and only a
    loopback name or the configured one passes; beyond loopback without names, anything."""
    rule = HostRule(loopback=True, names=(("memory.test", None),))
    parsed = split_host(host)
    if rule.allows_host(host):
        assert parsed is not None
        assert parsed[0] == "memory.test" or is_loopback(parsed[0])
    assert not rule.allows_origin(f"null{host}")
    assert HostRule(loopback=False).allows_host(host)


@pytest.mark.parametrize(
    ("protocol", "nodelay"),
    [
        (ServerHTTPProtocol, True),
        # uvicorn's own leaves Nagle on here (its issue #3149); when a release fixes
        # that, this case fails and ServerHTTPProtocol can go.
        (AutoHTTPProtocol, False),
    ],
)
def test_connections_to_a_socket_bound_for_workers_have_nagle_off(
    protocol: type[asyncio.Protocol], nodelay: bool
) -> None:
    """For several workers uvicorn binds the socket as below, not saying it is TCP, so the
    event loop leaves Nagle's algorithm on; the protocol turns it off on each connection."""

    async def accepted_nodelay() -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app=lambda *_: None, http=protocol)
        config.load()
        state = ServerState()
        server = await asyncio.get_running_loop().create_server(
            lambda: config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=state, app_state={}
            ),
            sock=listener,
        )
        _, writer = await asyncio.open_connection(*listener.getsockname())

        async def recorded() -> None:
            while not state.connections:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(recorded(), timeout=10)
        [connection] = state.connections
        accepted = connection.transport.get_extra_info("socket")
        option = int(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()
        server.close()
        return option

    assert bool(asyncio.run(accepted_nodelay())) is nodelay


# --- a user id as one path segment -----------------------------------------------------------

_ids = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1)
_rests = st.sampled_from(["", "/agents/coder/facts", "/summaries", "/agents/a/facts/fact_1"])


def _routed_path(raw: str, *, with_raw: bool = True) -> str:
    """The path the routing sees for a request sent as ``raw``, as uvicorn decodes it."""
    seen: list[str] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        seen.append(str(scope["path"]))

    scope: dict[str, object] = {"type": "http", "path": unquote(raw)}
    if with_raw:
        scope["raw_path"] = raw.encode("ascii")
    asyncio.run(UserSegmentMiddleware(app)(scope, None, None))  # type: ignore[arg-type]
    return seen[0]


@given(st.sampled_from(USER_PATH_PREFIXES), _ids, _rests)
def test_the_routing_sees_a_user_id_as_one_segment_that_decodes_to_it(
    prefix: str, user: str, rest: str
) -> None:
    sent = prefix + quote(user, safe="") + rest
    assert _routed_path(sent) == sent  # so `/` in the id is %2F, `%` is %25: one segment


@given(st.sampled_from(USER_PATH_PREFIXES), _ids.filter(lambda u: "/" not in u), _rests)
def test_without_the_path_as_sent_the_decoded_segment_is_the_user(
    prefix: str, user: str, rest: str
) -> None:
    sent = prefix + quote(user, safe="") + rest
    assert _routed_path(sent, with_raw=False) == sent


def test_other_paths_are_left_as_they_are() -> None:
    assert _routed_path("/v1/health%2Fx") == "/v1/health/x"
