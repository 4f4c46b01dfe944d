"""Data type functions (Array API standard, chapter "Data Type Functions")."""
from __future__ import annotations

__all__: list[str] = []
