"""The inspector: the web pages at ``/ui/`` of ``deermem serve``.

An interface over :class:`~deermem.memory.Memory` beside the HTTP API, in the
same process, with the same tokens and the same store. Each page authorises,
calls one or two ``Memory`` methods (``scopes``, ``ranking``, ``search``,
``list_archived``, ``why``, ``restore``, ``purge``, ``what_if``, ``regret``)
and renders a Jinja2 template with autoescaping on; nothing here decides
anything another interface would need.

**Sessions.** Signing in with a token makes a session: a random id in an
``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` when the request came
over TLS: through a same-machine proxy's ``X-Forwarded-Proto``, which
:mod:`deermem.service.http.run` has uvicorn believe), and a record in the
server's state directory (so every worker process sees it) that holds the
token's *id*, never the token. Every request looks the token up again, so a
revoked or expired token ends its sessions at once; signing out deletes the
record. The record's file name is the SHA-256 of the session id, so reading
the directory gives nobody a session.

**CSRF.** Every form that changes something carries a token: the session's
own random token (synchronizer), or — on the sign-in form, before there is a
session — an HMAC of a pre-session cookie under the server's secret (a file
in the state directory, made on first use). A POST without the right token
is refused (403) and changes nothing.

**What a token sees.** Exactly what its API calls may see: an admin token
every user, a user token its users; another user's scope is "not found",
as in the API (:meth:`ServerContext.memory_for`).

**Headers.** ``Content-Security-Policy`` allows the server's own style sheet
and images and nothing else: no script at all, no inline style, no frame;
every asset is served from the package (no CDN: the machine may be offline).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Annotated, Final
from urllib.parse import parse_qs, quote
from xml.sax.saxutils import escape, quoteattr

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from deermem.errors import DeerMemError, FactNotFoundError, UnsafeIdentifierError
from deermem.library.regret import RegretReport
from deermem.memory import Memory
from deermem.model import Scope, format_timestamp, is_fact_id, parse_timestamp, shown_user_id
from deermem.results import ScopeSummary
from deermem.service.http.routes import ServerContext, UserPath
from deermem.service.middleware import current_request_id
from deermem.service.problems import ProblemError, operator_note, problem_for
from deermem.service.tokens import Principal
from deermem.store.markdown.files import atomic_write, make_directories
from deermem.store.records import REGRET_KINDS

__all__ = [
    "SESSIONS_PER_TOKEN",
    "UI_PREFIX",
    "Inspector",
    "SessionStore",
    "inspector_router",
    "regret_svg",
]

UI_PREFIX: Final = "/ui"
SESSION_COOKIE: Final = "deermem_ui"
PRE_SESSION_COOKIE: Final = "deermem_ui_pre"
SESSION_LIFETIME: Final = timedelta(hours=12)
# Live sessions one token may hold; a sign-in beyond it ends the token's oldest session
# (as `deermem mcp` bounds its sessions per token).
SESSIONS_PER_TOKEN: Final = 32
# How often at most a sign-in sweeps every token's expired sessions (a token that never
# signs in again leaves at most SESSIONS_PER_TOKEN records until then).
_SWEEP_EVERY: Final = timedelta(hours=1)
_SWEPT_FILE: Final = "swept"
PAGE_SIZE: Final = 100
ARCHIVE_PAGE_SIZE: Final = 50
_MAX_FORM_BYTES: Final = 16 * 1024
_SECRET_FILE: Final = "ui-secret"
_KEY_LENGTH: Final = 16
_HEX: Final = "0123456789abcdef"
_SESSIONS_DIRECTORY: Final = "ui-sessions"
_CSP: Final = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS: Final = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: under it a browser sends `Origin: null` with a form, which the
    # host guard (rightly) refuses; same-origin tells nothing to another site.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
_STATIC: Final = {
    "inspector.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_log = logging.getLogger("deermem.service.ui")


# --- sessions --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Session:
    """One signed-in browser: whose token, its CSRF token, until when."""

    session_id: str
    token_id: str | None
    csrf: str
    expires_at: str


class SessionStore:
    """Sessions as files in the server's state directory, shared by every worker.

    Each token's sessions are in a directory of their own, named by a digest of the
    token's id, and a session id starts with that name: a sign-in reads only its own
    token's records (at most :data:`SESSIONS_PER_TOKEN`), whatever other tokens hold,
    and a request finds its session's file from the cookie alone.

    Args:
        directory: the server's state directory (``ui-sessions/`` and the
            ``ui-secret`` file go in it, mode 0600).
        clock: the server's clock (aware UTC).
    """

    def __init__(self, directory: Path, clock: Callable[[], datetime]) -> None:
        self.directory = directory
        self.clock = clock
        self._secret: bytes | None = None

    @property
    def _sessions(self) -> Path:
        return self.directory / _SESSIONS_DIRECTORY

    @staticmethod
    def _token_key(token_id: str | None) -> str:
        """The name of a token's directory (``None``: the open loopback server's)."""
        named = "open" if token_id is None else f"token:{token_id}"
        return hashlib.sha256(named.encode("utf-8", "replace")).hexdigest()[:_KEY_LENGTH]

    def _path(self, session_id: str) -> Path | None:
        """The record of a session id; ``None`` for an id this store never makes."""
        key, dot, _ = session_id.partition(".")
        if not dot or len(key) != _KEY_LENGTH or key.strip(_HEX):
            return None
        digest = hashlib.sha256(session_id.encode("ascii", "replace")).hexdigest()
        return self._sessions / key / f"{digest}.json"

    def create(self, token_id: str | None) -> Session:
        """A new session for the token with this id (``None``: the open loopback server).

        The token's expired sessions go, and its oldest beyond :data:`SESSIONS_PER_TOKEN`.
        """
        key = self._token_key(token_id)
        session = Session(
            session_id=f"{key}.{secrets.token_urlsafe(32)}",
            token_id=token_id,
            csrf=secrets.token_urlsafe(32),
            expires_at=format_timestamp(self.clock() + SESSION_LIFETIME),
        )
        path = self._path(session.session_id)
        assert path is not None  # made just above in the form _path reads
        make_directories(path.parent)
        live = self._prune(path.parent)
        # Oldest first (they all live equally long); room for the new one.
        for _, old in sorted(live)[: max(0, len(live) - SESSIONS_PER_TOKEN + 1)]:
            old.unlink(missing_ok=True)
        record = {"tokenId": token_id, "csrf": session.csrf, "expiresAt": session.expires_at}
        atomic_write(path, json.dumps(record).encode(), mode=0o600)
        self._sweep()
        return session

    def _prune(self, directory: Path) -> list[tuple[datetime, Path]]:
        """Delete the records of expired sessions in one token's directory (a browser that
        never signed out); the others, with when each expires."""
        now = self.clock()
        live = []
        for path in directory.glob("*.json"):
            try:
                expires = parse_timestamp(str(json.loads(path.read_bytes()).get("expiresAt")))
            except (OSError, ValueError, AttributeError):
                continue  # being written, or not ours to judge
            if expires is None:
                continue
            if expires <= now:
                path.unlink(missing_ok=True)
            else:
                live.append((expires, path))
        return live

    def _sweep(self) -> None:
        """Once per :data:`_SWEEP_EVERY` at most: every token's expired sessions go (the
        tokens that never sign in again)."""
        marker = self._sessions / _SWEPT_FILE
        now = self.clock()
        try:
            last = parse_timestamp(marker.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            last = None
        if last is not None and now - last < _SWEEP_EVERY:
            return
        atomic_write(marker, format_timestamp(now).encode(), mode=0o600)
        for directory in self._sessions.iterdir():
            if directory.is_dir():
                self._prune(directory)

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id; ``None`` for an unknown, ended or expired one."""
        if not session_id or len(session_id) > 128:
            return None
        path = self._path(session_id)
        if path is None:
            return None
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        expires = parse_timestamp(str(data.get("expiresAt", "")))
        token_id, csrf = data.get("tokenId"), data.get("csrf")
        if expires is None or expires <= self.clock() or not isinstance(csrf, str):
            path.unlink(missing_ok=True)
            return None
        if token_id is not None and not isinstance(token_id, str):
            return None
        return Session(session_id, token_id, csrf, format_timestamp(expires))

    def end(self, session_id: str) -> None:
        """Sign out: the session's record goes, so its cookie opens nothing any more."""
        path = self._path(session_id)
        if path is not None:
            path.unlink(missing_ok=True)

    def secret(self) -> bytes:
        """The server's HMAC key for pre-session CSRF tokens, made on first use."""
        if self._secret is None:
            path = self.directory / _SECRET_FILE
            if not path.exists():
                # Written aside, then linked into place: the first worker's key wins
                # and every worker reads that one (a link never replaces a file).
                make_directories(path.parent)
                aside = path.with_name(f"{_SECRET_FILE}.{secrets.token_hex(8)}")
                atomic_write(aside, secrets.token_bytes(32), mode=0o600)
                try:
                    os.link(aside, path)
                except FileExistsError:
                    pass
                finally:
                    aside.unlink(missing_ok=True)
            self._secret = path.read_bytes()
        return self._secret

    def pre_session_token(self, nonce: str) -> str:
        """The sign-in form's CSRF token for this pre-session cookie value."""
        return hmac.new(self.secret(), nonce.encode("ascii", "replace"), "sha256").hexdigest()


# --- the inspector ---------------------------------------------------------------------


class _Refused(Exception):
    """A page cannot be shown: a status, a title and a sentence for the reader."""

    def __init__(self, status: int, title: str, detail: str, *, logged_as: str = "") -> None:
        super().__init__(title)
        self.status = status
        self.title = title
        self.detail = detail
        # The request id of the log line about it; empty when nothing was logged (pages
        # the reader must not tell apart, as "not found", stay byte for byte the same).
        self.logged_as = logged_as


@dataclass(frozen=True, slots=True)
class ScopeRow:
    """A row of the scopes page: a scope and its counts, or why they cannot be read."""

    scope: Scope
    summary: ScopeSummary | None
    problem: str


_NOT_FOUND: Final = (404, "Not found", "There is nothing here, or nothing this token may see.")


@dataclass
class Inspector:
    """What the pages stand on: the server's context (memory, tokens, checks) and sessions.

    The checks are the API's own: :func:`~deermem.service.tokens.principal_for_header`
    decides who a token (or none, on an open loopback server) is, and
    :meth:`ServerContext.memory_for` which scopes it reaches.
    """

    context: ServerContext
    sessions: SessionStore

    @property
    def memory(self) -> Memory:
        return self.context.memory

    def needs_token(self) -> bool:
        """Whether signing in takes a token (not on a loopback server without tokens)."""
        return self.context.auth_required or self.context.tokens.configured()

    def principal(self, session: Session) -> Principal | None:
        """Who a session acts for now; ``None`` once its token is revoked or expired."""
        if session.token_id is None:
            return self._check(None)
        tokens = self.context.tokens.records()
        record = next((r for r in tokens if r.token_id == session.token_id), None)
        if record is None or record.expired(self.memory.now()):
            return None
        return record.principal

    def sign_in(self, token: str) -> Session | None:
        """A session for a presented token; ``None`` when it opens nothing."""
        token = token.strip()
        principal = self._check(f"Bearer {token}" if token else None)
        if principal is None:
            return None
        return self.sessions.create(principal.token_id)

    def scoped(self, principal: Principal, user: str, agent: str | None) -> Memory:
        """The memory of a scope the principal may see; else "not found" (as in the API)."""
        return self.context.memory_for(principal, user, agent)

    def _check(self, authorization: str | None) -> Principal | None:
        try:
            return self.context.principal_for(authorization)
        except ProblemError:
            return None


def _purged(memory: Memory, fact_id: str) -> str:
    """The id a purge redirected with (``?purged=``), if that fact is really gone from the
    scope; else nothing. A link can carry any text, so the notice "… was purged" is shown
    only for an id whose receipts remain and that is neither active nor archived."""
    if not is_fact_id(fact_id):
        return ""
    try:
        return fact_id if memory.why(fact_id).status == "gone" else ""
    except FactNotFoundError:
        return ""


def _not_in_archive(memory: Memory, fact_id: str) -> _Refused:
    """The page for a restore or purge of a fact the archive does not hold: where the fact
    is, when the scope (which this token may see) holds or held it — a form sent twice, or
    reloaded, finds it restored or purged — else "not found"."""
    try:
        status = memory.why(fact_id).status if is_fact_id(fact_id) else None
    except FactNotFoundError:
        status = None
    if status == "active":
        where = "it is in the library (restored already, if this form was sent before)"
    elif status == "gone":
        where = "it was purged or expired from it; only its receipts remain"
    else:
        return _Refused(*_NOT_FOUND)
    return _Refused(404, "Not in the archive", f"{fact_id} is not in the archive: {where}.")


# A browser removes the path segments `.` and `..`, percent-encoded or not (URL standard),
# so no link could reach the users with those ids: the inspector's paths write them after a
# NUL, a character no user id holds (model.check_user_id), and read them back.
_DOT_ESCAPE: Final = "\x00"
_DOT_IDS: Final = (".", "..")


def user_segment(user: str) -> str:
    """A user id as one segment of an inspector path (what :data:`InspectorUser` reads)."""
    return quote(_DOT_ESCAPE + user if user in _DOT_IDS else user, safe="")


async def _inspector_user(user: UserPath) -> str:
    # Async: a plain function would be a hop to the thread pool (routes.UserPath's note).
    if user.startswith(_DOT_ESCAPE) and user[1:] in _DOT_IDS:
        return user[1:]
    return user


InspectorUser = Annotated[str, Depends(_inspector_user)]
"""The user id of an inspector path: :data:`~deermem.service.http.routes.UserPath`, with
:func:`user_segment`'s escape of ``.`` and ``..`` undone."""


def _templates() -> Environment:
    folder = Path(str(resources.files("deermem.service.http") / "templates"))
    environment = Environment(
        loader=FileSystemLoader(folder),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["score"] = lambda value: f"{value:.4f}"
    environment.filters["part"] = lambda value: quote(str(value), safe="")
    environment.filters["user_part"] = user_segment
    environment.filters["shown"] = shown_user_id
    return environment


def inspector_router(inspector: Inspector) -> APIRouter:
    """The ``/ui/`` pages over one server's memory (kept out of the OpenAPI document)."""
    ui = APIRouter(prefix=UI_PREFIX, include_in_schema=False)
    templates = _templates()
    static = resources.files("deermem.service.http") / "static"

    def page(
        request: Request,
        name: str,
        context: Mapping[str, object],
        *,
        status: int = 200,
        session: Session | None = None,
    ) -> HTMLResponse:
        body = templates.get_template(name).render(
            **context, signed_in=session is not None, csrf=session.csrf if session else ""
        )
        return HTMLResponse(body, status_code=status, headers=_HEADERS)

    def scope_page(
        request: Request,
        name: str,
        title: str,
        user: str,
        memory: Memory,
        session: Session,
        **values: object,
    ) -> HTMLResponse:
        """A page about one user's and agent's memory: the title, user and agent every such
        page shows, and its own ``values``."""
        context = {"title": title, "user": user, "agent": memory.scope.agent, **values}
        return page(request, name, context, session=session)

    def refusal(request: Request, error: _Refused, session: Session | None) -> HTMLResponse:
        return page(
            request,
            "error.html",
            {"title": error.title, "detail": error.detail, "logged_as": error.logged_as},
            status=error.status,
            session=session,
        )

    def session_of(request: Request) -> Session | None:
        return inspector.sessions.get(request.cookies.get(SESSION_COOKIE))

    def sign_in_redirect() -> RedirectResponse:
        return RedirectResponse(f"{UI_PREFIX}/sign-in", status_code=303, headers=_HEADERS)

    def signed_in(request: Request) -> tuple[Session, Principal] | None:
        session = session_of(request)
        if session is None:
            return None
        principal = inspector.principal(session)
        if principal is None:
            inspector.sessions.end(session.session_id)
            return None
        return session, principal

    def failure(error: Exception) -> _Refused:
        """A library error as the page that says it; "not found" for any unreachable scope."""
        if isinstance(error, _Refused):
            return error
        if isinstance(error, FactNotFoundError | UnsafeIdentifierError):
            return _Refused(*_NOT_FOUND)
        if isinstance(error, ProblemError) and error.problem.status == 404:
            return _Refused(*_NOT_FOUND)  # another user's scope: the page of one that is not
        if isinstance(error, ProblemError | DeerMemError):
            problem = problem_for(error)
            # The API's own line (app.py): a problem's detail may say "the log names the
            # file", and this line is the one that does, under the page's request id.
            note = operator_note(error, problem)
            if note is None:
                return _Refused(problem.status, problem.title, problem.detail)
            _log.error("inspector: %s", note)
            return _Refused(
                problem.status, problem.title, problem.detail, logged_as=current_request_id()
            )
        raise error

    def view(request: Request, render: Callable[[Session, Principal], Response]) -> Response:
        who = None
        try:
            # Inside: a tokens file broken since start-up fails the session's check, and
            # that is this page's error, not the API's JSON.
            who = signed_in(request)
            if who is None:
                return sign_in_redirect()
            return render(*who)
        except (DeerMemError, _Refused) as error:
            return refusal(request, failure(error), who[0] if who else None)

    async def form(request: Request) -> dict[str, str]:
        body = await request.body()
        if len(body) > _MAX_FORM_BYTES:
            raise _Refused(413, "Form too large", "The form sent more than this page takes.")
        try:
            fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=8)
        except (UnicodeDecodeError, ValueError):
            raise _Refused(400, "Bad form", "The form could not be read.") from None
        return {key: values[0] for key, values in fields.items()}

    async def action(request: Request, act: Callable[[Session, Principal], Response]) -> Response:
        """A POST: signed in, the session's CSRF token in the form, then the act."""
        who = None
        try:
            who = signed_in(request)  # inside, as in view()
            if who is None:
                return sign_in_redirect()
            sent = (await form(request)).get("csrf", "")
            if not hmac.compare_digest(sent.encode(), who[0].csrf.encode()):
                raise _Refused(
                    403,
                    "Form refused",
                    "This form did not carry this session's token; reload the page and try again.",
                )
            return await run_in_threadpool(act, *who)
        except (DeerMemError, _Refused) as error:
            return refusal(request, failure(error), who[0] if who else None)

    def cookie_args(request: Request) -> dict[str, object]:
        return {
            "httponly": True,
            "samesite": "strict",
            "secure": request.url.scheme == "https",
            "path": f"{UI_PREFIX}/",
        }

    # --- signing in and out -------------------------------------------------------

    @ui.get("/sign-in")
    def sign_in_form(request: Request) -> Response:
        nonce = request.cookies.get(PRE_SESSION_COOKIE) or secrets.token_urlsafe(24)
        needs_token = inspector.needs_token()
        response = page(
            request,
            "sign_in.html",
            {
                "title": "Sign in",
                "form_token": inspector.sessions.pre_session_token(nonce),
                "needs_token": needs_token,
                "failed": request.query_params.get("failed") == "1",
            },
        )
        response.set_cookie(PRE_SESSION_COOKIE, nonce, **cookie_args(request))  # type: ignore[arg-type]
        return response

    @ui.post("/sign-in")
    async def sign_in(request: Request) -> Response:
        try:
            fields = await form(request)
        except _Refused as error:
            return refusal(request, error, None)
        nonce = request.cookies.get(PRE_SESSION_COOKIE, "")
        expected = inspector.sessions.pre_session_token(nonce) if nonce else ""
        if not nonce or not hmac.compare_digest(fields.get("csrf", "").encode(), expected.encode()):
            return refusal(
                request,
                _Refused(403, "Form refused", "Open the sign-in page again and sign in from it."),
                None,
            )
        try:
            session = await run_in_threadpool(inspector.sign_in, fields.get("token", ""))
        except DeerMemError as error:  # the tokens file broke since start-up
            return refusal(request, failure(error), None)
        if session is None:
            return RedirectResponse(
                f"{UI_PREFIX}/sign-in?failed=1", status_code=303, headers=_HEADERS
            )
        previous = request.cookies.get(SESSION_COOKIE)
        if previous:  # this browser's earlier session: its cookie is replaced, so it ends
            await run_in_threadpool(inspector.sessions.end, previous)
        response = RedirectResponse(f"{UI_PREFIX}/", status_code=303, headers=_HEADERS)
        response.set_cookie(SESSION_COOKIE, session.session_id, **cookie_args(request))  # type: ignore[arg-type]
        response.delete_cookie(PRE_SESSION_COOKIE, path=f"{UI_PREFIX}/")
        return response

    @ui.post("/sign-out")
    async def sign_out(request: Request) -> Response:
        def act(session: Session, principal: Principal) -> Response:
            inspector.sessions.end(session.session_id)
            response = sign_in_redirect()
            response.delete_cookie(SESSION_COOKIE, path=f"{UI_PREFIX}/")
            return response

        return await action(request, act)

    # --- the pages ----------------------------------------------------------------

    @ui.get("/static/{name}")
    def asset(name: str) -> Response:
        if name not in _STATIC:
            return Response(status_code=404, headers=_HEADERS)
        body = (static / name).read_bytes()
        headers = {**_HEADERS, "Cache-Control": "public, max-age=3600"}
        return Response(body, media_type=_STATIC[name], headers=headers)

    @ui.get("/")
    def scopes(request: Request) -> Response:
        def render(session: Session, principal: Principal) -> Response:
            # Only the scopes this token may see are read, and each on its own: one
            # user's damaged file is that row's problem, never another user's page.
            seen = sorted(
                (
                    scope
                    for scope in inspector.memory.store.scopes()
                    if scope.user_id is not None and principal.may_address(scope.user_id)
                ),
                key=lambda scope: (scope.user_id or "", scope.agent),
            )
            rows = []
            for scope in seen:
                try:
                    rows.append(ScopeRow(scope, inspector.memory.scope_summary(scope), ""))
                except DeerMemError as error:
                    rows.append(ScopeRow(scope, None, failure(error).title))
            return page(
                request, "scopes.html", {"title": "Scopes", "scopes": rows}, session=session
            )

        return view(request, render)

    @ui.get("/users/{user}")
    def user_page(request: Request, user: InspectorUser) -> Response:
        def render(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, None)
            agents = memory.store.agents(user)
            if not agents:
                raise _Refused(*_NOT_FOUND)
            report = memory.regret(whole_user=True)
            return page(
                request,
                "user.html",
                {
                    "title": f"User {shown_user_id(user)}",
                    "user": user,
                    "agents": agents,
                    **_regret(report, memory.gate.policy.name),
                },
                session=session,
            )

        return view(request, render)

    scope_path = "/users/{user}/agents/{agent}"

    @ui.get(scope_path)
    def library(request: Request, user: InspectorUser, agent: str) -> Response:
        def render(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, agent)
            query = request.query_params.get("q", "").strip()[:500]
            ranking = memory.ranking()
            _held(memory, empty=not ranking.facts and not memory.archive_page(0, 0)[1])
            found = memory.search(query, top_k=20, record=False) if query else ()
            ranks = {item.fact.id: item for item in ranking.facts}
            pages = max(1, -(-len(ranking.facts) // PAGE_SIZE))
            number = _page_number(request, pages)
            start = (number - 1) * PAGE_SIZE
            shown = ranking.facts[start : start + PAGE_SIZE]
            going = next((item for item in ranking.facts if item.next_out), None)
            below = next((item for item in ranking.facts if not item.kept), None)
            return scope_page(
                request,
                "library.html",
                f"{shown_user_id(user)} / {memory.scope.agent}",
                user,
                memory,
                session,
                ranking=ranking,
                shown=shown,
                page=number,
                pages=pages,
                going=going,
                below=below,
                query=query,
                found=[(result, ranks.get(result.fact_id)) for result in found],
                **_regret(memory.regret(), memory.gate.policy.name),
            )

        return view(request, render)

    @ui.get(f"{scope_path}/archive")
    def archive(request: Request, user: InspectorUser, agent: str) -> Response:
        def render(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, agent)
            number = _page_number(request)
            entries, total = memory.archive_page(
                (number - 1) * ARCHIVE_PAGE_SIZE, ARCHIVE_PAGE_SIZE
            )
            _held(memory, empty=not total and not memory.ranking().facts)
            pages = max(1, -(-total // ARCHIVE_PAGE_SIZE))
            if number > pages:  # past the last: the last (the total is known only now)
                number = pages
                entries, total = memory.archive_page(
                    (number - 1) * ARCHIVE_PAGE_SIZE, ARCHIVE_PAGE_SIZE
                )
                pages = max(1, -(-total // ARCHIVE_PAGE_SIZE))
            return scope_page(
                request,
                "archive.html",
                f"Archive of {shown_user_id(user)} / {memory.scope.agent}",
                user,
                memory,
                session,
                entries=entries,
                total=total,
                page=number,
                pages=pages,
                notice=_purged(memory, request.query_params.get("purged", "")),
            )

        return view(request, render)

    @ui.get(f"{scope_path}/facts/{{fact_id}}")
    def why(request: Request, user: InspectorUser, agent: str, fact_id: str) -> Response:
        def render(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, agent)
            explanation = memory.why(fact_id)
            receipt, line = explanation.last_eviction
            return scope_page(
                request,
                "why.html",
                f"Why {fact_id}",
                user,
                memory,
                session,
                why=explanation,
                receipt=receipt,
                line=line,
            )

        return view(request, render)

    @ui.post(f"{scope_path}/archive/{{fact_id}}/restore")
    async def restore(request: Request, user: InspectorUser, agent: str, fact_id: str) -> Response:
        def act(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, agent)
            try:
                result = memory.restore(fact_id)
            except FactNotFoundError:
                raise _not_in_archive(memory, fact_id) from None
            # When the gate sent it back, its receipt says where it stood (a reserved
            # correction may have kept its slot although the fact outranked it).
            receipt = next((r for r in result.receipts if r.entry_for(fact_id)), None)
            left = []
            # The restored fact itself is among the evicted when the gate sent it back:
            # it did not leave in its own place.
            for gone in (fact for fact in result.evicted if fact != result.fact_id):
                try:
                    left.append(memory.get_archived(gone))
                except FactNotFoundError:
                    continue  # eviction_mode: delete — only the receipt names it
            return scope_page(
                request,
                "restored.html",
                f"Restore {fact_id}",
                user,
                memory,
                session,
                result=result,
                left=left,
                receipt=receipt,
                line=receipt.entry_for(fact_id) if receipt else None,
            )

        return await action(request, act)

    @ui.get(f"{scope_path}/archive/{{fact_id}}/purge")
    def purge_form(request: Request, user: InspectorUser, agent: str, fact_id: str) -> Response:
        def render(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, agent)
            entry = memory.get_archived(fact_id)
            return scope_page(
                request, "purge.html", f"Purge {fact_id}", user, memory, session, entry=entry
            )

        return view(request, render)

    @ui.post(f"{scope_path}/archive/{{fact_id}}/purge")
    async def purge(request: Request, user: InspectorUser, agent: str, fact_id: str) -> Response:
        def act(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, agent)
            try:
                memory.purge(fact_id)
            except FactNotFoundError:
                raise _not_in_archive(memory, fact_id) from None
            where = f"{UI_PREFIX}/users/{user_segment(user)}/agents/{memory.scope.agent}"
            return RedirectResponse(
                f"{where}/archive?purged={quote(fact_id, safe='')}",
                status_code=303,
                headers=_HEADERS,
            )

        return await action(request, act)

    @ui.get(f"{scope_path}/what-if")
    def what_if(request: Request, user: InspectorUser, agent: str) -> Response:
        def render(session: Session, principal: Principal) -> Response:
            memory = inspector.scoped(principal, user, agent)
            result = memory.what_if()
            _held(memory, empty=not result.candidates)
            by_id = {fact.id: fact for fact in result.candidates}
            return scope_page(
                request,
                "what_if.html",
                f"What if — {shown_user_id(user)} / {memory.scope.agent}",
                user,
                memory,
                session,
                result=result,
                by_id=by_id,
            )

        return view(request, render)

    return ui


def _page_number(request: Request, pages: int | None = None) -> int:
    """The page asked for: the first for what is no page number, the last (when known)
    for a number past it."""
    text = request.query_params.get("page", "1")
    # ASCII digits only: str.isdigit also takes '²', which int() refuses.
    number = int(text) if text.isascii() and text.isdigit() and len(text) < 7 else 1
    return max(1, number if pages is None else min(number, pages))


def _held(memory: Memory, *, empty: bool) -> None:
    """Refuse, as "not found", the page of an empty scope the store does not hold: a scope
    that does not exist reads as another user's, on every page of a scope."""
    if empty and memory.scope not in memory.store.scopes():
        raise _Refused(*_NOT_FOUND)


def _regret(report: RegretReport, policy: str) -> dict[str, object]:
    """The chart and the numbers beside it, for a template; ``policy`` is the one in
    force (a report also lists, as active, the policies that decided earlier receipts)."""
    active = report.policy(policy, "active")
    return {
        "report": report,
        "chart": Markup(regret_svg(report, policy)),  # built from escaped parts
        "kinds": REGRET_KINDS,
        "active_policy": policy,
        "active_timeline": active.timeline if active else (),
    }


# --- the regret chart -------------------------------------------------------------------
#
# Two panels over the days of a report: each policy's regret rate (regretted /
# evicted), and the running total of regret events by kind under the policy in force.
# Pure: the same report draws the same bytes. Presentation attributes only (no
# ``style``), so the page's Content-Security-Policy needs no inline styles.

_WIDTH: Final = 640
_PANEL: Final = 150
_LEFT: Final = 48
# The legend's column: its longest label, "confidence (shadow)" at 11 px, is about 115 px
# wide, and starts 40 px into the margin.
_RIGHT: Final = 170
_TOP: Final = 24
_GAP: Final = 44
# Distinguishable in colour and in dash, so a reader who cannot tell the colours apart
# tells the lines apart (the table beside the chart holds every number anyway).
_STYLES: Final = (
    ("#1f77b4", ""),
    ("#d62728", "6 3"),
    ("#2ca02c", "2 2"),
    ("#9467bd", "8 3 2 3"),
    ("#ff7f0e", "4 4"),
    ("#8c564b", "1 3"),
)


def regret_svg(report: RegretReport, policy: str) -> str:
    """The chart as one ``<svg>`` element, titled for screen readers; its events panel is
    ``policy``'s, the policy in force."""
    days = sorted({point.date for row in report.policies for point in row.timeline})
    first = date.fromisoformat(days[0]).toordinal() if days else 0
    span = max(1, date.fromisoformat(days[-1]).toordinal() - first) if days else 1
    active = report.policy(policy, "active")
    most = max(
        (max(point.kinds.values(), default=0) for point in active.timeline) if active else (),
        default=0,
    )
    height = _TOP + 2 * _PANEL + _GAP + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {height}" '
        f'width="{_WIDTH}" height="{height}" role="img" aria-labelledby="regret-chart-title">',
        '<title id="regret-chart-title">Regret rate per policy, and regret events by kind '
        f"(running totals) under the active policy {escape(policy)}, by day (UTC)</title>",
    ]
    top = _TOP
    bottom = _TOP + _PANEL + _GAP
    parts += _axes(top, "regret rate", 1.0)
    parts += _axes(bottom, f"events under {policy} (running total)", float(max(most, 1)))
    for index, row in enumerate(report.policies):
        colour, dash = _STYLES[index % len(_STYLES)]
        points = [
            (_x(point.date, first, span), point.regretted / point.evictions)
            for point in row.timeline
            if point.evictions
        ]
        parts += _line(points, top, 1.0, colour, dash)
        parts.append(_legend(index, top, colour, dash, f"{row.policy} ({row.role})"))
    if active is not None:
        for index, kind in enumerate(REGRET_KINDS):
            colour, dash = _STYLES[index % len(_STYLES)]
            points = [
                (_x(point.date, first, span), float(point.kinds.get(kind, 0)))
                for point in active.timeline
            ]
            parts += _line(points, bottom, float(max(most, 1)), colour, dash)
            parts.append(_legend(index, bottom, colour, dash, kind))
    if days:
        for label, anchor, x in ((days[0], "start", _LEFT), (days[-1], "end", _WIDTH - _RIGHT)):
            parts.append(
                f'<text x="{x}" y="{bottom + _PANEL + 16}" font-size="11" '
                f'text-anchor="{anchor}">{escape(label)}</text>'
            )
    else:
        parts.append(
            f'<text x="{_LEFT + 8}" y="{top + _PANEL // 2}" font-size="12">'
            "No evictions or regret events yet.</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _x(day: str, first: int, span: int) -> float:
    offset = date.fromisoformat(day).toordinal() - first
    return _LEFT + (_WIDTH - _LEFT - _RIGHT) * offset / span


def _y(value: float, top: int, scale: float) -> float:
    return top + _PANEL - _PANEL * min(value, scale) / scale


def _axes(top: int, label: str, scale: float) -> list[str]:
    right = _WIDTH - _RIGHT
    top_label = "1" if scale == 1.0 else f"{scale:g}"
    return [
        f'<text x="{_LEFT}" y="{top - 8}" font-size="12">{escape(label)}</text>',
        f'<line x1="{_LEFT}" y1="{top + _PANEL}" x2="{right}" y2="{top + _PANEL}" stroke="#555"/>',
        f'<line x1="{_LEFT}" y1="{top}" x2="{_LEFT}" y2="{top + _PANEL}" stroke="#555"/>',
        f'<line x1="{_LEFT}" y1="{top}" x2="{right}" y2="{top}" stroke="#ddd"/>',
        f'<text x="{_LEFT - 6}" y="{top + 4}" font-size="11" text-anchor="end">{top_label}</text>',
        f'<text x="{_LEFT - 6}" y="{top + _PANEL + 4}" font-size="11" text-anchor="end">0</text>',
    ]


def _line(
    points: list[tuple[float, float]], top: int, scale: float, colour: str, dash: str
) -> list[str]:
    if not points:
        return []
    coords = " ".join(f"{x:.1f},{_y(v, top, scale):.1f}" for x, v in points)
    dashed = f" stroke-dasharray={quoteattr(dash)}" if dash else ""
    shape = f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dashed}/>'
    dots = [
        f'<circle cx="{x:.1f}" cy="{_y(v, top, scale):.1f}" r="2.5" fill="{colour}"/>'
        for x, v in points
    ]
    return [shape, *dots] if len(points) < 40 else [shape]


def _legend(index: int, top: int, colour: str, dash: str, label: str) -> str:
    x = _WIDTH - _RIGHT + 12
    y = top + 10 + 18 * index
    dashed = f" stroke-dasharray={quoteattr(dash)}" if dash else ""
    return (
        f'<line x1="{x}" y1="{y}" x2="{x + 22}" y2="{y}" stroke="{colour}" '
        f'stroke-width="2"{dashed}/>'
        f'<text x="{x + 28}" y="{y + 4}" font-size="11">{escape(label)}</text>'
    )
