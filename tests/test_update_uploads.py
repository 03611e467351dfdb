"""The upload clean-up (catalogue: test_memory_upload_filtering.py,
TestStripUploadMentionsFromMemory)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem.learning.messages import mentions_upload, strip_upload_sentences
from deermem.learning.plan import REASON_UPLOAD, MemoryState
from deermem.store import Section as SummarySection
from tests.update_support import fact, new_fact, normalized, plan

UPLOAD_EVENTS = [
    "The user uploaded a test file.",
    "User is uploading a test file for the demo",
    "The user uploaded two spreadsheets",
    "Uploaded report.pdf for review",
    "uploaded the quarterly sales report.pdf",
    "The file was uploaded yesterday.",
    "Two images have been uploaded.",
    "Shared an upload of the server logs.",
    "Input lives at /mnt/user-data/uploads/q3.csv",
    "See <uploaded_files> for details",
    "用户上传了一个文件",
    "附件已上传",
]
NOT_EVENTS = [
    "The user works with CSV files.",
    "Prefers PDF export.",
    "Prefers PDF export for quarterly reports.",
    "The user prefers uploading files via the CLI.",
    "Wants to upload backups to S3 nightly.",
    "Maintains an upload service written in Go.",
    "Reads documents on a Kindle.",
    "喜欢用 PDF 格式导出报告",
    "",
]


@pytest.mark.parametrize("text", UPLOAD_EVENTS)
def test_upload_events_are_recognised(text: str) -> None:
    assert mentions_upload(text)


@pytest.mark.parametrize("text", NOT_EVENTS)
def test_facts_about_files_are_not_upload_events(text: str) -> None:
    assert not mentions_upload(text)


def test_only_the_sentences_with_an_upload_event_are_cut() -> None:
    text = (
        "Data engineer at ACME. The user uploaded report.pdf today! Prefers PDF export.\n"
        "Files are under /mnt/user-data/uploads/ for now\n"
        "用户上传了文件。喜欢乌龙茶。"
    )
    assert strip_upload_sentences(text) == (
        "Data engineer at ACME. Prefers PDF export.\n喜欢乌龙茶。",
        3,
    )


def test_text_without_an_upload_event_is_returned_as_it_is() -> None:
    assert strip_upload_sentences("  Likes tea.  ") == ("  Likes tea.  ", 0)
    assert strip_upload_sentences("") == ("", 0)


def test_the_plan_drops_removes_and_cleans() -> None:
    memory = MemoryState(
        facts=(
            fact("fact_up", "The user uploaded a test file."),
            fact("fact_csv", "Works with CSV files."),
            fact("fact_hand", "Uploaded my CV to the job portal", source="manual"),
        ),
        summaries={
            ("user", "workContext"): SummarySection("Engineer. Uploaded a CSV file today.", "x"),
            ("user", "topOfMind"): SummarySection("Shipping v2.", "x"),
        },
    )
    section = {"shouldUpdate": True, "scope": "user", "authority": "descriptive"}
    response = normalized(
        newFacts=[new_fact("The user uploaded two spreadsheets."), new_fact("Prefers PDF export.")],
        user={
            "topOfMind": {"summary": "The user uploaded a PDF file.", **section},
            "personalContext": {"summary": "Lives in Lyon. Uploaded a photo.", **section},
        },
    )
    result = plan(memory, response)
    assert [f.content for f in result.new_facts] == ["Prefers PDF export."]
    assert [(r.fact_id, r.reason) for r in result.removals] == [("fact_up", REASON_UPLOAD)]
    assert [f.id for f in result.facts] == ["fact_csv", "fact_hand", "fact_00000001"]
    stamp = "2026-08-13T12:00:00Z"
    assert dict(result.summaries) == {
        ("user", "workContext"): SummarySection("Engineer.", stamp),  # stored text cleaned
        ("user", "personalContext"): SummarySection("Lives in Lyon.", stamp),
        # topOfMind: the proposal was nothing but an upload event, so the stored text stays
    }
    metrics = result.metrics
    assert (metrics.upload_facts_dropped, metrics.upload_removals) == (1, 1)
    assert metrics.upload_sentences_removed == 3


def test_an_empty_memory_is_handled() -> None:
    result = plan(MemoryState(), normalized())
    assert not result.changes_anything


def test_a_replacement_that_is_an_upload_event_blocks_its_removal() -> None:
    memory = MemoryState(facts=(fact("fact_a", "Uses pip"),))
    response = normalized(
        newFacts=[new_fact("The user uploaded a requirements.txt file.")],
        factsToRemove=[{"id": "fact_a", "scope": "user", "reason": "r", "replacementFactIndex": 0}],
    )
    (pending,) = plan(memory, response).pending_removals
    assert pending.replacement_key is not None
    assert pending.replacement_fact_id is None  # nothing holds it: the removal will be blocked


def test_a_confirmed_fact_removed_as_an_upload_event_is_not_reported_confirmed() -> None:
    memory = MemoryState(facts=(fact("fact_up", "Uploaded a test file"),))
    response = normalized(factsToReinforce=[{"id": "fact_up", "scope": "user", "reason": "r"}])
    result = plan(memory, response, signals=frozenset({"reinforcement"}))
    assert result.confirmed == ()
    assert result.updated_facts == ()
    assert [r.fact_id for r in result.removals] == ["fact_up"]


@given(st.text(max_size=400))
def test_stripping_never_raises_and_never_adds(text: str) -> None:
    stripped, cut = strip_upload_sentences(text)
    assert len(stripped) <= len(text)
    assert (cut == 0) == (stripped == text)
    if cut:
        assert not mentions_upload(stripped)


@pytest.mark.parametrize(
    "text",
    [
        "uploaded " + "word " * 8000,
        "uploading the " + "x" * 8000,
        "file " * 8000 + "was",
        "上传" + "字" * 8000,
        ". " * 8000,
        "report.pdf" * 1000,
    ],
)
def test_scanning_is_fast_on_adversarial_text(text: str) -> None:
    started = time.perf_counter()
    strip_upload_sentences(text)
    assert time.perf_counter() - started < 1.0


def test_a_cleaned_section_is_stamped_with_the_plans_clock() -> None:
    key = ("user", "workContext")
    memory = MemoryState(summaries={key: SummarySection("Uploaded a file.", "")})
    result = plan(memory, normalized())
    assert result.summaries[key] == SummarySection("", "2026-08-13T12:00:00Z")
