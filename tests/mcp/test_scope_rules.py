"""Which memory a token reaches on an MCP server: the rule, case by case."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem.service.mcp import Caller, caller_for
from deermem.service.problems import ProblemError
from deermem.service.tokens import Principal

OPEN = Principal.unauthenticated()


def token(*users: str, admin: bool = False) -> Principal:
    return Principal(token_id="0123456789ab", users=frozenset(users), admin=admin)


@pytest.mark.parametrize(
    ("principal", "configured", "expected"),
    [
        # An open loopback server (no tokens) serves its own scope, with or without --user.
        (OPEN, "alice", Caller(None, "alice")),
        (OPEN, None, Caller(None, None)),
        # --user alice: tokens that may address alice reach alice.
        (token("alice"), "alice", Caller("0123456789ab", "alice")),
        (token("alice", "bob"), "alice", Caller("0123456789ab", "alice")),
        (token(admin=True), "alice", Caller("0123456789ab", "alice")),
        # No --user: a token bound to one user reaches that user.
        (token("bob"), None, Caller("0123456789ab", "bob")),
    ],
)
def test_who_reaches_which_memory(
    principal: Principal, configured: str | None, expected: Caller
) -> None:
    assert caller_for(principal, configured) == expected


@pytest.mark.parametrize(
    ("principal", "configured", "reason"),
    [
        (token("bob"), "alice", "user"),  # bob's token on alice's server
        (token("bob", "carol"), "alice", "user"),
        (token(admin=True), None, "ambiguous"),  # which user would an admin mean?
        (token("alice", "bob"), None, "ambiguous"),
    ],
)
def test_tokens_the_server_does_not_serve_are_refused(
    principal: Principal, configured: str | None, reason: str
) -> None:
    with pytest.raises(ProblemError) as refused:
        caller_for(principal, configured)
    problem = refused.value.problem
    assert problem.status == 403
    assert problem.slug == "scope-not-allowed"
    assert problem.extensions == {"reason": reason}
    # The answer names no user: not the server's, not the token's.
    for user in ("alice", "bob", "carol"):
        assert user not in problem.detail


users = st.text(alphabet="abcdefghij", min_size=1, max_size=4)


@given(st.frozensets(users, max_size=3), st.booleans(), st.none() | users)
def test_a_token_never_reaches_a_user_it_may_not_address(
    grants: frozenset[str], admin: bool, configured: str | None
) -> None:
    principal = Principal(token_id="0123456789ab", users=grants, admin=admin)
    try:
        caller = caller_for(principal, configured)
    except ProblemError:
        return
    assert caller.user is not None
    assert principal.may_address(caller.user)
    assert configured is None or caller.user == configured
