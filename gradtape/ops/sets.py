"""Set functions (Array API standard, chapter "Set Functions")."""
from __future__ import annotations

__all__: list[str] = []
