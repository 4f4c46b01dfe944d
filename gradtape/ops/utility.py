"""Utility functions (Array API standard, chapter "Utility Functions")."""
from __future__ import annotations

__all__: list[str] = []
