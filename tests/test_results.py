"""What the memory takes and returns is described once (``deermem.results``).

The input models are the memory's own rules, so a value the HTTP API refuses
the Python API refuses too, and the MCP tools state the same bounds (with
MCP's one tighter bound, on content, said where it is declared). The
interfaces keep no hand-written JSON of their own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from mcp import Client
from pydantic import BaseModel, TypeAdapter, ValidationError

import deermem
from deermem import FactValidationError, Memory, MemoryConfig
from deermem.model import WireForm
from deermem.results import FactPatch, NewFact, to_json
from deermem.service.mcp import create_mcp_server
from deermem.service.settings import ToolLimits

NOW = datetime(2026, 8, 13, tzinfo=UTC)
SOURCE = Path(deermem.__file__).parent


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory.open(tmp_path, MemoryConfig(), user="alice", clock=lambda: NOW)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"expected_valid_days": 0}, "expectedValidDays"),  # the HTTP API's bound
        ({"expected_valid_days": "30"}, "expectedValidDays"),
        ({"topics": [""]}, "topics[0]"),
        ({"confidence": "0.5"}, "confidence"),
    ],
)
def test_the_python_api_refuses_what_the_http_body_refuses(
    memory: Memory, fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(FactValidationError) as caught:
        memory.create_fact("A fact.", **fields)
    assert caught.value.field == field
    assert memory.list_facts() == ()


def test_the_models_state_the_memorys_rules(memory: Memory) -> None:
    created = memory.create_fact("  Trimmed.  ", category="  ", topics=("uv",))
    fact = memory.get_fact(created.fact_id or "")
    assert (fact.content, fact.category, fact.topics) == ("Trimmed.", "context", ("uv",))
    assert NewFact.checked(content=" x ", source_error="  ").source_error is None
    with pytest.raises(FactValidationError, match="at least one of content"):
        FactPatch.checked(expected_revision=2)
    assert FactPatch.checked(confidence=1).changes() == {"confidence": 1.0}


def test_the_mcp_arguments_are_the_input_models_fields(memory: Memory) -> None:
    async def listed() -> dict[str, Any]:
        async with Client(create_mcp_server(memory)) as session:
            return {tool.name: tool for tool in (await session.list_tools()).tools}

    tools = anyio.run(listed)
    model = NewFact.model_json_schema()["properties"]
    add = tools["memory_add"].input_schema["properties"]
    for name in ("category", "confidence", "topics"):
        assert add[name] == model[name], name
    # MCP's one tighter bound, stated where the argument is declared.
    assert add["content"] == {**model["content"], "maxLength": ToolLimits().max_content_chars}
    assert model["content"]["maxLength"] == 4000
    update = tools["memory_update"].input_schema["properties"]
    stated = {key: model["confidence"][key] for key in ("minimum", "maximum", "description")}
    assert stated.items() <= update["confidence"]["anyOf"][0].items()


def test_a_result_is_written_by_its_description(memory: Memory) -> None:
    result = memory.create_fact("Uses uv.")
    assert to_json(result) == {
        "factId": result.fact_id,
        "evicted": [],
        "receipts": [],
        "relearned": None,
        "redacted": [],  # issue 26: the kinds of secret replaced (none here)
        "kept": True,
        "proposedFactId": result.fact_id,
        "message": f"stored as {result.fact_id}",  # in plain words too (issue 24)
    }


def interface_modules() -> list[Path]:
    """The facade and the interfaces (the evaluation's commands are its own)."""
    modules = [SOURCE / "memory.py", SOURCE / "results.py"]
    for package in ("service", "integrations", "cli"):
        modules += sorted((SOURCE / package).rglob("*.py"))
    return [path for path in modules if "eval" not in path.relative_to(SOURCE).parts]


def test_the_facade_and_the_interfaces_write_no_json_by_hand() -> None:
    """No ``to_dict``: a result's JSON is its description's, the same for every interface."""
    hand_written = [
        f"{path.relative_to(SOURCE)}:{node.lineno}"
        for path in interface_modules()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name in ("to_dict", "public_dict")
    ]
    assert len(interface_modules()) > 20
    assert hand_written == []


class _Unbuildable:
    """A type whose pydantic schema nobody may ask for."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        raise AssertionError("the schema of the record's own class was built")


@dataclass(frozen=True)
class _Record:
    value: _Unbuildable


class _RecordOut(BaseModel):
    value: str


def test_a_record_on_the_wire_is_described_without_building_its_own_schema() -> None:
    """``WireForm`` takes the record as it is, writes it with its function and shows its
    model's schema; the schema of the record's class (a fact, a receipt: dataclasses of many
    fields) is never built. ``PlainValidator`` and ``PlainSerializer`` built it and threw it
    away, on every model and tool that returns a fact or a receipt."""
    adapter: TypeAdapter[_Record] = TypeAdapter(
        Annotated[_Record, WireForm(lambda record: {"value": "written"}, _RecordOut)]
    )
    record = _Record(_Unbuildable())
    assert adapter.validate_python(record) is record
    assert adapter.dump_python(record, mode="json") == {"value": "written"}
    with pytest.raises(ValidationError, match="expected a _Record"):
        adapter.validate_python({"value": "written"})
    assert adapter.json_schema() == _RecordOut.model_json_schema()


@pytest.mark.parametrize("topic", [" ", "\u3000", "  \u00a0 "])
def test_a_blank_topic_is_refused_like_blank_content(topic: str) -> None:
    with pytest.raises(FactValidationError, match=r"topics\[1\].*not blank"):
        NewFact.checked(content="Uses uv", topics=["tools", topic])
