"""Small text helpers shared by the prompt renderers."""

from __future__ import annotations

import html

from deermem.model import Fact

__all__ = ["content_key", "display_category", "escape_text"]


def escape_text(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so text cannot open or close a prompt block.

    Quotes are left alone (``quote=False``): they cannot break a tag-delimited
    block, and escaping them would make every quoted phrase harder to read.
    """
    return html.escape(text, quote=False)


def content_key(content: str) -> str:
    """What two facts must share to be duplicates: stripped, case-folded text."""
    return content.strip().casefold()


def display_category(fact: Fact) -> str:
    """The category as the model should see it: the label it (or a person)
    gave, even when the store files it under ``other``."""
    return fact.categoryExtension or fact.category
