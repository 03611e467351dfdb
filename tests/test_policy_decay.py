"""``decay`` is the contract's ``2 ** (-max(0, days) / half_life)``, bit for bit.

It spells ``max(0, days)`` as a comparison; this checks that the two agree for
every float, including -0.0, infinities and NaN (where ``max`` keeps its first
argument, 0).
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from deermem.policy import decay


@given(
    days=st.floats(allow_nan=True, allow_infinity=True),
    half_life=st.floats(min_value=1e-6, max_value=1e6),
)
def test_decay_is_the_contract_formula(days: float, half_life: float) -> None:
    assert repr(decay(days, half_life)) == repr(2 ** (-max(0, days) / half_life))


def test_decay_at_the_edges() -> None:
    assert decay(-3.0, 90) == 1.0  # a future time does not decay
    assert decay(math.nan, 90) == 1.0
    assert decay(90.0, 90) == 0.5
    assert decay(math.inf, 90) == 0.0
