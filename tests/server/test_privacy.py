"""DELETE /v1/users/{user} and GET /v1/users/{user}/export on real servers (issue 26).

Two servers (two workers) serve one store; both have served the user (their
caches and search indexes are warm) when an admin erases the user through
one of them. Afterwards neither answers anything of the user, the user's own
token is revoked, a shared token no longer names them, and nothing of them
is left in the store or the server's state directory.
"""

from __future__ import annotations

from ..privacy.stored import files_text, store_text
from ..served_store import ServedStore, on_both_stores
from .conftest import start_server

ERIN = "erin-http-4e2c"
FRANK = "frank-http-8b1d"


def scoped(user: str, agent: str = "coder") -> str:
    return f"/v1/users/{user}/agents/{agent}"


@on_both_stores
def test_an_admin_erases_a_user_and_no_server_answers_from_memory_afterwards(
    store: ServedStore,
) -> None:
    first, tokens = start_server(
        store,
        tokens={
            "erin": {"users": [ERIN]},
            "both": {"users": [ERIN, FRANK]},
            "frank": {"users": [FRANK]},
            "admin": {"admin": True},
        },
    )
    second, _ = start_server(store)  # another worker on the same store and state directory
    try:
        erin = first.client(tokens["erin"])
        for agent in ("coder", "writer"):
            for number in range(3):
                created = erin.post(
                    f"{scoped(ERIN, agent)}/facts",
                    json={"content": f"erin keeps narwhal{number}{ERIN[-4:]} notes"},
                )
                assert created.status_code == 201, created.text
        frank = first.client(tokens["frank"])
        assert frank.post(f"{scoped(FRANK)}/facts", json={"content": "frank likes tea"}).is_success
        for server in (first, second):  # both workers have served erin: warm caches
            admin = server.client(tokens["admin"])
            found = admin.get(f"{scoped(ERIN)}/search", params={"q": f"narwhal1{ERIN[-4:]}"})
            # the fact with the word first (search by meaning finds its neighbours too)
            assert found.json()["results"][0]["fact"]["content"] == (
                f"erin keeps narwhal1{ERIN[-4:]} notes"
            )
            assert len(admin.get(f"{scoped(ERIN)}/facts").json()["facts"]) == 3

        exported = erin.get(f"/v1/users/{ERIN}/export")  # the user's own token may export
        assert exported.status_code == 200
        assert len(exported.json()["agents"]["writer"]["facts"]) == 3
        assert frank.get(f"/v1/users/{ERIN}/export").status_code == 404

        assert erin.delete(f"/v1/users/{ERIN}").status_code == 403  # own token: not enough
        assert frank.delete(f"/v1/users/{ERIN}").status_code == 404
        erased = first.client(tokens["admin"]).delete(f"/v1/users/{ERIN}")
        assert erased.status_code == 200, erased.text
        body = erased.json()
        assert body["erased"] is True
        assert body["counts"]["facts"] == 6
        assert body["counts"]["agents"] == 2
        assert body["counts"]["tokensRevoked"] == 1

        assert erin.get(f"{scoped(ERIN)}/facts").status_code == 401  # revoked
        shared = first.client(tokens["both"])
        assert shared.get(f"{scoped(ERIN)}/facts").status_code == 404
        assert shared.get(f"{scoped(FRANK)}/facts").status_code == 200
        for server in (first, second):
            admin = server.client(tokens["admin"])
            for agent in ("coder", "writer"):
                assert admin.get(f"{scoped(ERIN, agent)}/facts").json()["facts"] == []
                found = admin.get(
                    f"{scoped(ERIN, agent)}/search", params={"q": f"narwhal1{ERIN[-4:]}"}
                )
                assert found.json()["results"] == []
            assert len(admin.get(f"{scoped(FRANK)}/facts").json()["facts"]) == 1
        again = first.client(tokens["admin"]).delete(f"/v1/users/{ERIN}")
        assert again.status_code == 200
        assert again.json()["erased"] is False
    finally:
        first.stop()
        second.stop()
    held = store_text(store.kind, store.root, store.url) + files_text(store.state_dir)
    assert ERIN not in held
    assert "narwhal1" + ERIN[-4:] not in held
    assert FRANK in held
