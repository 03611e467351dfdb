"""Fake secrets of every kind, built from a random source, for tests and measurements.

Nothing here is a real credential: every value is random characters in the
documented shape of a kind. The known prefixes are written split
(``"gh" + "p_"``) so that a secret scanner run over this repository (GitHub
push protection, detect-secrets in pre-commit) does not take this file for a
leak.

Each maker takes a :class:`random.Random` (Hypothesis' ``st.randoms()`` in the
tests, a seeded one in the benchmark) and returns a :class:`Fake`: the
snippet as it would be pasted (``key=value`` for the kinds that are
assignments) and the secret inside it, which must vanish.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["MAKERS", "Fake", "card_number", "luhn_complete"]

ALNUM: Final = string.ascii_letters + string.digits
B64: Final = ALNUM + "+/"
URLSAFE: Final = ALNUM + "-_"


@dataclass(frozen=True, slots=True)
class Fake:
    """A fake secret as pasted.

    Attributes:
        kind: the kind :func:`redaction.redact` must report.
        snippet: the text to paste (the secret, or ``key=value``).
        secret: the characters that must not survive redaction.
        assignment: whether ``snippet`` carries its key (``password=…``),
            so the surrounding context must not add another.
    """

    kind: str
    snippet: str
    secret: str
    assignment: bool = False


def _chars(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _body(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """Random characters with at least a digit, a lower- and an upper-case letter
    (as every generated key has; see the redactor's randomness check)."""
    chars = list(_chars(rng, n, alphabet))
    for position, pool in zip(
        rng.sample(range(n), 3), (string.digits, "abcdefghjk", "MNPQRS"), strict=False
    ):
        chars[position] = rng.choice(pool)
    return "".join(chars)


def _token(kind: str, secret: str) -> Fake:
    return Fake(kind, secret, secret)


def openai(rng: random.Random) -> Fake:
    prefix = rng.choice(["proj-", "svcacct-", "admin-", ""])
    if prefix:
        body = _body(rng, rng.randint(40, 160), URLSAFE)
    elif rng.random() < 0.5:
        body = _body(rng, 20) + "T3Blbk" + "FJ" + _body(rng, 20)  # the legacy shape
    else:
        body = _body(rng, 48)
    return _token("openai-key", "s" + "k-" + prefix + body)


def anthropic(rng: random.Random) -> Fake:
    kind = rng.choice(["api03", "admin01"])
    return _token("anthropic-key", "sk" + "-ant-" + kind + "-" + _body(rng, 93, URLSAFE) + "AA")


def aws_access_key(rng: random.Random) -> Fake:
    prefix = rng.choice(["AK" + "IA", "AS" + "IA"])
    return _token("aws-access-key", prefix + _chars(rng, 16, string.ascii_uppercase + "234567"))


def aws_secret(rng: random.Random) -> Fake:
    key = rng.choice(
        ["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "secretAccessKey", "aws_session_token"]
    )
    value = _body(rng, 40 if "token" not in key else rng.randint(100, 300), B64)
    separator = rng.choice([" = ", "=", ": "])
    return Fake("aws-access-key", key + separator + value, value, assignment=True)


def github(rng: random.Random) -> Fake:
    if rng.random() < 0.3:
        return _token("github-token", "github" + "_pat_" + _body(rng, 22) + "_" + _body(rng, 59))
    return _token("github-token", "gh" + rng.choice("pousr") + "_" + _body(rng, 36))


def gitlab(rng: random.Random) -> Fake:
    prefix = rng.choice(["gl" + "pat-", "gl" + "dt-", "gl" + "rt-", "gl" + "ptt-"])
    return _token("gitlab-token", prefix + _body(rng, rng.choice([20, 40]), URLSAFE))


def slack(rng: random.Random) -> Fake:
    choice = rng.random()
    if choice < 0.6:
        secret = (
            "xo"
            + "x"
            + rng.choice("bpa")
            + "-"
            + _chars(rng, 12, string.digits)
            + "-"
            + _chars(rng, 13, string.digits)
            + "-"
            + _body(rng, 24)
        )
    elif choice < 0.8:
        secret = (
            "xa"
            + "pp-1-A"
            + _chars(rng, 10, string.ascii_uppercase + string.digits)
            + ("-" + _chars(rng, 13, string.digits) + "-" + _body(rng, 64, "abcdef0123456789"))
        )
    else:
        secret = (
            "https://hooks.slack"
            + ".com/services/T"
            + _chars(rng, 8, string.ascii_uppercase)
            + "/B"
            + _chars(rng, 10, string.ascii_uppercase)
            + "/"
            + _body(rng, 24)
        )
    return _token("slack-token", secret)


def stripe(rng: random.Random) -> Fake:
    prefix = rng.choice(["sk_" + "live_", "rk_" + "live_", "sk_" + "test_", "wh" + "sec_"])
    return _token("stripe-key", prefix + _body(rng, rng.choice([24, 32, 99])))


def google(rng: random.Random) -> Fake:
    choice = rng.random()
    if choice < 0.7:
        return _token("google-api-key", "AI" + "za" + _body(rng, 35, URLSAFE))
    if choice < 0.85:
        return _token("google-api-key", "GOC" + "SPX-" + _body(rng, 28, URLSAFE))
    return _token("google-api-key", "ya" + "29." + _body(rng, 120, URLSAFE))


def npm(rng: random.Random) -> Fake:
    if rng.random() < 0.7:
        return _token("npm-token", "np" + "m_" + _body(rng, 36))
    value = "-".join(_chars(rng, n, "0123456789abcdef") for n in (8, 4, 4, 4, 12))
    return Fake("npm-token", "//registry.npmjs.org/:_auth" + "Token=" + value, value, True)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(rng: random.Random) -> Fake:
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    claims = {"sub": _chars(rng, 12), "iat": rng.randint(1_600_000_000, 1_900_000_000)}
    if rng.random() < 0.5:
        claims["email"] = _chars(rng, 6, string.ascii_lowercase) + "@example.com"
    signature = _b64url(rng.randbytes(rng.choice([32, 64, 256])))
    token = ".".join(
        [_b64url(json.dumps(header).encode()), _b64url(json.dumps(claims).encode()), signature]
    )
    return _token("jwt", token)


def bearer(rng: random.Random) -> Fake:
    value = _body(rng, rng.randint(20, 60), ALNUM + "-._~")
    choice = rng.random()
    if choice < 0.4:
        snippet = "Bearer " + value
    elif choice < 0.7:
        snippet = "Authorization: Bearer " + value
    elif choice < 0.85:
        value = base64.b64encode(
            (_chars(rng, 6, string.ascii_lowercase) + ":" + _body(rng, 12)).encode()
        ).decode()
        snippet = "Authorization: Basic " + value
    else:
        snippet = "authorization=" + value
    return Fake("bearer-token", snippet, value, assignment=True)


_PEM_TYPES: Final = (
    "RSA PRIVATE KEY",
    "EC PRIVATE KEY",
    "PRIVATE KEY",
    "OPENSSH PRIVATE KEY",
    "ENCRYPTED PRIVATE KEY",
    "DSA PRIVATE KEY",
    "PGP PRIVATE KEY BLOCK",
)


def private_key(rng: random.Random) -> Fake:
    label = rng.choice(_PEM_TYPES)
    body = base64.b64encode(rng.randbytes(rng.choice([48, 121, 300, 1190]))).decode()
    lines = [body[n : n + 64] for n in range(0, len(body), 64)]
    newline = rng.choice(["\n", "\r\n"])
    block = newline.join(["-----BEGIN " + label + "-----", *lines, "-----END " + label + "-----"])
    return _token("private-key", block)


_PASSWORD_KEYS: Final = (
    "password",
    "passwd",
    "pwd",
    "db_password",
    "DB_PASSWORD",
    "PGPASSWORD",
    "userPassword",
    "passphrase",
    "smtp.password",
)
# Password characters: letters, digits and symbols, without quotes, spaces,
# ``&`` (ends a query value) and brackets (a value like ``get(x)`` reads as code).
_PASSWORD_CHARS: Final = ALNUM + "!#*+-_=.,;:?/~^|@"


def password(rng: random.Random) -> Fake:
    key = rng.choice(_PASSWORD_KEYS)
    inner = _chars(rng, rng.randint(0, 20), _PASSWORD_CHARS)
    # Starts and ends with a letter or digit, and holds a digit (a password that
    # is one lower-case word followed by prose is a known miss).
    value = rng.choice(ALNUM) + rng.choice(string.digits) + inner + rng.choice(ALNUM)
    form = rng.choice(["key=value", "key: value", "json", "quoted", "url"])
    if form == "key=value":
        snippet = key + "=" + value
    elif form == "key: value":
        snippet = key + ": " + value
    elif form == "json":
        value = value.replace("\\", "")  # in JSON: no escapes needed
        snippet = json.dumps({key: value})[1:-1]
    elif form == "quoted":
        value = value + " " + _chars(rng, 5)  # a quoted value may hold spaces
        snippet = key + " = '" + value + "'"
    else:
        value = value.replace("@", "").replace("/", "").replace("?", "") or "x1"
        snippet = "postgres://app:" + value + "@db.internal:5432/app"
    return Fake("password", snippet, value, assignment=True)


_NETWORK_PREFIXES: Final = (
    ("4", 16),
    ("51", 16),
    ("55", 16),
    ("2221", 16),
    ("2720", 16),
    ("34", 15),
    ("37", 15),
    ("6011", 16),
    ("65", 16),
    ("62", 19),
    ("3530", 16),
    ("36", 14),
    ("4", 19),
)


def luhn_complete(partial: str) -> str:
    """``partial`` followed by the check digit that makes it pass the Luhn check."""
    total = 0
    for n, char in enumerate(reversed(partial)):
        value = int(char)
        if n % 2 == 0:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return partial + str(-total % 10)


def card_number(rng: random.Random) -> str:
    """A number that passes the Luhn check, in a network's range and length.

    A 9 after the network's prefix keeps it clear of the public test numbers
    (``4242…``, ``4111…``, ``4000…``), which the redactor lets pass.
    """
    prefix, length = rng.choice(_NETWORK_PREFIXES)
    return luhn_complete(prefix + "9" + _chars(rng, length - len(prefix) - 2, string.digits))


def card(rng: random.Random) -> Fake:
    digits = card_number(rng)
    separator = rng.choice(["", " ", "-"])
    if separator and len(digits) == 15:
        shown = separator.join([digits[:4], digits[4:10], digits[10:]])
    elif separator:
        shown = separator.join(digits[n : n + 4] for n in range(0, len(digits), 4))
    else:
        shown = digits
    if len(shown) >= 17:
        # 17 to 19 digits in one group are a card only after a card word (an id of that
        # length passes the Luhn check one time in ten): pasted as a card is, named.
        return Fake("payment-card", f"card {shown}", shown)
    return Fake("payment-card", shown, shown)


MAKERS: Final[dict[str, Callable[[random.Random], Fake]]] = {
    "openai-key": openai,
    "anthropic-key": anthropic,
    "aws-access-key": aws_access_key,
    "aws-secret-assignment": aws_secret,
    "github-token": github,
    "gitlab-token": gitlab,
    "slack-token": slack,
    "stripe-key": stripe,
    "google-api-key": google,
    "npm-token": npm,
    "jwt": jwt,
    "bearer-token": bearer,
    "private-key": private_key,
    "password": password,
    "payment-card": card,
}
"""One maker per shape; the names are kinds, except ``aws-secret-assignment``
(reported as ``aws-access-key``)."""
