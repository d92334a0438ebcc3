"""The H100-style hardware root of trust for storage (docs/rts.md): ``MeasurementStore``
(design ``rts``), extend-only SHA-384 measurement slots with per-slot owner locks. Enums and
layouts are in :mod:`hw.rts.layout`."""
from .core import MeasurementStore
from .layout import Status

__all__ = ["MeasurementStore", "Status"]
