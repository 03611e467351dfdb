"""The policy names: the strings results, configs and receipts record.

They live apart from the selector so that code which only checks or records
a policy name — a protocol config's ``required_policy_version``, a results
table — can import them without importing the scoring code.
"""

from __future__ import annotations

from typing import Final

__all__ = ["POLICIES", "POLICY_CONFIDENCE", "POLICY_HYBRID_V1"]

POLICY_CONFIDENCE: Final = "confidence"
POLICY_HYBRID_V1: Final = "hybrid-v1"
POLICIES: Final = (POLICY_CONFIDENCE, POLICY_HYBRID_V1)
