"""ITX device: the SXP path with tile memory, the ICU's reset scrub and the CCU's exception
pin (``itx_device``)."""
from .device import ItxDevice, TileMemory
from .regs import icu_register_map

__all__ = ["ItxDevice", "TileMemory", "icu_register_map"]
