"""Every setting whose range is not the plain one (a count or size of at least 1, a time above 0, a 0 that turns
a thing off) has its bounds in docs/operations.md, where an operator reads them before a start-up refuses them."""

from __future__ import annotations

from pathlib import Path

import annotated_types as at

from service.settings import Settings

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _bounds(name: str) -> tuple[float | None, float | None]:
    lo = hi = None
    for m in Settings.model_fields[name].metadata:
        if isinstance(m, at.Ge):
            lo = m.ge
        elif isinstance(m, at.Le):
            hi = m.le
        elif isinstance(m, at.Lt):
            hi = m.lt
    return lo, hi


def test_every_setting_with_a_bound_of_its_own_has_it_in_the_operations_guide() -> None:
    text = " ".join(OPERATIONS.read_text().split())
    missing = []
    for name in Settings.model_fields:
        lo, hi = _bounds(name)
        plain = hi is None and lo in (None, 0, 1)
        if plain:
            continue
        var = f"`VELA_{name.upper()}`"
        numbers = [f"{int(b)}" if float(b).is_integer() else f"{b}" for b in (lo, hi) if b is not None]
        at_var = text.find(var, text.find("A value out of its range"))
        sentence = text[at_var : text.find(";", at_var)] if at_var >= 0 else ""
        if not sentence or not all(n in sentence for n in numbers):
            missing.append((var, numbers))
    assert missing == []
