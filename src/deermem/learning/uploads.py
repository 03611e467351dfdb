"""Upload events are not memory: the last clean-up of an update.

A user who uploads a file is doing something in *this* session; "the user
uploaded a CSV file" or a path under ``/mnt/user-data/uploads/`` is no more
a fact about them than "the user pressed enter". Upload blocks are cut from
the conversation before the model sees it (:mod:`deermem.learning.signals.filtering`),
but a model can still write an upload event into a fact or a summary — from
an assistant reply that mentioned the file, say. So after planning, as the
original DeerMem does after applying:

* a **new fact** that mentions an upload event is dropped;
* a **stored fact** that mentions one is removed (reason :data:`REASON_UPLOAD`,
  archived with a receipt like any removal) — except facts a person wrote
  by hand (source ``manual``), which an extraction never deletes;
* in every **summary section**, the sentences that mention one are cut; a
  proposed section left blank by the cut is not applied.

What counts as an upload event is deliberately narrow: an upload *that
happened* (``uploaded``, ``uploading a ...``, ``... was uploaded``,
``上传了 ... 文件``), an upload path, or an upload tag. A fact about file
*types* ("works with CSV files", "prefers PDF export") or a plan ("wants
to upload backups to S3 nightly") stays.

Everything here is pure and linear-time: every pattern is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from deermem.learning.responses import NewFactProposal
from deermem.learning.state import MemoryState, SummaryKey, SummarySection
from deermem.model import Fact

__all__ = [
    "REASON_UPLOAD",
    "UploadCleanup",
    "mentions_upload",
    "strip_upload_mentions",
    "strip_upload_sentences",
]

REASON_UPLOAD: Final = "upload"
"""The receipt reason of a stored fact removed for mentioning an upload event."""

_FILE_WORD: Final = (
    r"(?:files?|documents?|docs?|attachments?|pdfs?|csvs?|spreadsheets?|images?|photos?|"
    r"pictures?|screenshots?|archives?|datasets?|slides?|logs?|reports?|videos?|recordings?|"
    r"[\w-]{1,64}\.(?:pdf|csv|tsv|xlsx?|docx?|pptx?|txt|md|json|ya?ml|png|jpe?g|gif|zip|gz))"
)
_DETERMINER: Final = (
    r"(?:a|an|the|this|that|these|those|some|several|two|three|\d{1,4}|"
    r"my|our|your|his|her|their|its)"
)
_GAP: Final = r"(?:[^\S\n]+[^\s.!?。！？]{1,40}){0,5}?[^\S\n]+"  # up to five words between
_UPLOAD_EVENT: Final = re.compile(
    "|".join(
        (
            # "uploaded a test file", "uploads the quarterly report.pdf"
            rf"\b(?:uploaded|uploads)\b{_GAP}{_FILE_WORD}\b",
            rf"\b(?:uploaded|uploads)[^\S\n]+{_FILE_WORD}\b",
            # "is uploading a test file" (but not "prefers uploading files via the CLI")
            rf"\buploading[^\S\n]+{_DETERMINER}\b(?:{_GAP}|[^\S\n]+){_FILE_WORD}\b",
            # "the file was uploaded", "two images have been uploaded"
            rf"\b{_FILE_WORD}[^\S\n]+(?:was|were|is|are|has been|have been|got|just)"
            r"[^\S\n]+(?:just[^\S\n]+)?uploaded\b",
            # "an upload of the logs"
            rf"\bupload[^\S\n]+of[^\S\n]+(?:{_DETERMINER}[^\S\n]+)?(?:[\w-]{{1,40}}[^\S\n]+)?"
            rf"{_FILE_WORD}\b",
            # Chinese: "上传了一个文件", "文件已上传"
            r"上传(?:了|过)?[^。！？\n]{0,20}?(?:文件|文档|附件|图片|表格|截图|照片|数据集)",
            r"(?:文件|文档|附件|图片|表格|截图|照片|数据集)[^。！？\n]{0,10}?(?:已|被)?上传",
            # Upload paths and the host's upload tags
            r"/mnt/user-data/uploads\b",
            r"/uploads/[^\s/]{1,255}",
            r"</?(?:uploaded_files|current_uploads)\b",
        )
    ),
    re.IGNORECASE,
)
# A sentence: text up to and including its end — ".", "!" or "?" before a space or the
# end (so "report.pdf" and "3.5" stay inside), a full-width stop, or a line break.
_SENTENCE: Final = re.compile(
    r"(?:[^.!?。！？\n]|[.!?]+(?=[^\s.!?。！？]))*"
    r"(?:[.!?]+(?=\s|$)[^\S\n]*|[。！？]+[^\S\n]*|\n|$)"
)


def mentions_upload(text: str) -> bool:
    """Whether ``text`` mentions an upload event (see the module docstring)."""
    # Every pattern holds "upload" or "上传": a substring test spares the full
    # scan for almost every fact (the clean-up runs over the whole library).
    if "上传" not in text and "upload" not in text.lower():
        return False
    return _UPLOAD_EVENT.search(text) is not None


def strip_upload_sentences(text: str) -> tuple[str, int]:
    """``text`` without the sentences that mention an upload event, and how many were cut.

    Sentences end at ``.``, ``!``, ``?`` (and their full-width forms) or a line
    break; the rest of the text is kept as written. Unchanged text is returned
    as it is (not even stripped).
    """
    if not mentions_upload(text):
        return text, 0
    kept: list[str] = []
    cut = 0
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0)
        if not sentence:
            continue
        if mentions_upload(sentence):
            cut += 1
        else:
            kept.append(sentence)
    return "".join(kept).strip(), cut


@dataclass(frozen=True, slots=True)
class UploadCleanup:
    """What the upload clean-up changed.

    Attributes:
        facts: the library without the stored facts that mention an upload.
        removed: ids of those stored facts, in library order.
        new_facts: the proposals without the ones that mention an upload.
        dropped: how many proposals were dropped.
        summaries: the summary changes to commit, cleaned; sections whose
            stored text mentioned an upload are included even when the
            model proposed nothing for them.
        sentences: summary sentences cut.
    """

    facts: tuple[Fact, ...]
    removed: tuple[str, ...]
    new_facts: tuple[NewFactProposal, ...]
    dropped: int
    summaries: dict[SummaryKey, SummarySection]
    sentences: int


def strip_upload_mentions(
    memory: MemoryState,
    library: Sequence[Fact],
    proposals: Iterable[NewFactProposal],
    summaries: dict[SummaryKey, SummarySection],
    stamp: str,
) -> UploadCleanup:
    """Apply the clean-up of the module docstring.

    Args:
        memory: the bucket before the update (its summary sections).
        library: the facts as the update left them so far.
        proposals: the new facts that passed the gate.
        summaries: the summary changes the update makes so far.
        stamp: ``updatedAt`` for a section changed only by the clean-up.
    """
    removed = tuple(
        fact.id
        for fact in library
        if fact.source.type != "manual" and mentions_upload(fact.content)
    )
    gone = set(removed)
    candidates = tuple(proposals)
    kept = tuple(p for p in candidates if not mentions_upload(p.content))
    changes: dict[SummaryKey, SummarySection] = {}
    sentences = 0
    for key, stored in memory.sections():
        proposed = summaries.get(key)
        if proposed is not None:
            text, cut = strip_upload_sentences(proposed.summary)
            sentences += cut
            if text.strip():
                if text != stored.summary:
                    changes[key] = SummarySection(summary=text, updatedAt=proposed.updatedAt)
                continue
        text, cut = strip_upload_sentences(stored.summary)
        sentences += cut
        if cut:
            changes[key] = SummarySection(summary=text, updatedAt=stamp)
    return UploadCleanup(
        facts=tuple(fact for fact in library if fact.id not in gone),
        removed=removed,
        new_facts=kept,
        dropped=len(candidates) - len(kept),
        summaries=changes,
        sentences=sentences,
    )
