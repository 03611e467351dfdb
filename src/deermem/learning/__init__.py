"""From conversation to memory: the parts of an update, and the queue.

One update, in the order :class:`deermem.learning.updater.Updater` runs it
(see docs/update.md):

1. :func:`fit_conversation` keeps the newest turns within the cap on what
   one update sends; :func:`build_update_prompt` renders the prompt
   (current memory, conversation, signal hints, aged facts) from a
   :class:`PromptLoader`'s template; :func:`response_json_schema`
   constrains a capable backend;
2. :func:`parse_update_response` finds the update object in the answer;
3. :func:`normalize_response` types and bounds it (or rejects it whole);
4. :func:`plan_update` applies the label gate, confirmations, summaries,
   the staleness review, the upload clean-up and the new facts, up to the
   capacity gate;
5. :func:`deermem.learning.apply.apply_response` hands the plan to the
   store's capacity gate, which decides, settles the contradiction removals
   and commits one change set; the result is an :class:`UpdateReport`.

:class:`UpdateQueue` debounces conversations and feeds only what is new
(:class:`Watermark`). The modules named here by their path
(``updater``, ``apply``) talk to a model and a store; everything exported
from this package itself does no I/O except reading prompt templates.
"""

from deermem.learning.confirm import (
    REINFORCEMENT_SIGNAL,
    ConfirmationOutcome,
    confirm_facts,
    next_confirmation_count,
)
from deermem.learning.conversation import (
    ConversationTurn,
    ConversationWindow,
    fit_conversation,
    format_conversation,
)
from deermem.learning.gate import GatedResponse, dedupe_new_facts, gate_response
from deermem.learning.metrics import (
    FactRejections,
    RemovalRejections,
    SummaryRejections,
    UpdateMetrics,
)
from deermem.learning.normalize import normalize_response
from deermem.learning.parse import NoUpdate, UpdatePayload, parse_update_response, response_text
from deermem.learning.plan import (
    REASON_CONTRADICTION,
    REASON_STALENESS,
    ContradictionOutcome,
    PendingRemoval,
    PlannedRemoval,
    UpdatePlan,
    new_fact_id,
    plan_update,
    resolve_contradiction_removals,
)
from deermem.learning.prompt import UpdatePrompt, build_update_prompt
from deermem.learning.queue import DEFAULT_AGENT, UpdateQueue
from deermem.learning.queue_items import FlushReport, QueueItem, QueueKey, QueueStats
from deermem.learning.report import FactChange, ModelCall, UpdateOutcome, UpdateReport, UpdateResult
from deermem.learning.responses import (
    NewFactProposal,
    NormalizedResponse,
    ReinforceEntry,
    RejectedResponse,
    RemovalEntry,
    StaleExtension,
    StaleRemoval,
    SummaryProposal,
)
from deermem.learning.schema import response_json_schema
from deermem.learning.settings import UpdateSettings
from deermem.learning.staleness import StalenessOutcome, review_staleness, stale_candidates
from deermem.learning.state import MemoryState, SummarySection
from deermem.learning.templates import PromptLoader, PromptTemplate
from deermem.learning.uploads import (
    REASON_UPLOAD,
    mentions_upload,
    strip_upload_mentions,
    strip_upload_sentences,
)
from deermem.learning.watermark import Watermark

__all__ = [
    "DEFAULT_AGENT",
    "REASON_CONTRADICTION",
    "REASON_STALENESS",
    "REASON_UPLOAD",
    "REINFORCEMENT_SIGNAL",
    "ConfirmationOutcome",
    "ContradictionOutcome",
    "ConversationTurn",
    "ConversationWindow",
    "FactChange",
    "FactRejections",
    "FlushReport",
    "GatedResponse",
    "MemoryState",
    "ModelCall",
    "NewFactProposal",
    "NoUpdate",
    "NormalizedResponse",
    "PendingRemoval",
    "PlannedRemoval",
    "PromptLoader",
    "PromptTemplate",
    "QueueItem",
    "QueueKey",
    "QueueStats",
    "ReinforceEntry",
    "RejectedResponse",
    "RemovalEntry",
    "RemovalRejections",
    "StaleExtension",
    "StaleRemoval",
    "StalenessOutcome",
    "SummaryProposal",
    "SummaryRejections",
    "SummarySection",
    "UpdateMetrics",
    "UpdateOutcome",
    "UpdatePayload",
    "UpdatePlan",
    "UpdatePrompt",
    "UpdateQueue",
    "UpdateReport",
    "UpdateResult",
    "UpdateSettings",
    "Watermark",
    "build_update_prompt",
    "confirm_facts",
    "dedupe_new_facts",
    "fit_conversation",
    "format_conversation",
    "gate_response",
    "mentions_upload",
    "new_fact_id",
    "next_confirmation_count",
    "normalize_response",
    "parse_update_response",
    "plan_update",
    "resolve_contradiction_removals",
    "response_json_schema",
    "response_text",
    "review_staleness",
    "stale_candidates",
    "strip_upload_mentions",
    "strip_upload_sentences",
]
