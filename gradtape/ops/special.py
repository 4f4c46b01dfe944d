"""``gt.special``: the special functions SciPy's array-API dispatch looks up (``xp.special.<name>``)."""
from __future__ import annotations

__all__: list[str] = []
