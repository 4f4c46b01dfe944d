"""The ``linalg`` extension of the Array API standard (2024.12): ``gt.linalg``."""
from __future__ import annotations

__all__: list[str] = []
