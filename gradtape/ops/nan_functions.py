"""NaN-ignoring reductions (``nansum``, ``nanmean``, ...): what xarray looks up on a namespace."""
from __future__ import annotations

__all__: list[str] = []
