"""Sorting functions (Array API standard, chapter "Sorting Functions")."""
from __future__ import annotations

__all__: list[str] = []
