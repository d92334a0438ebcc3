"""GPUShield Bounds-Checking Unit (docs/gpushield.md): ``BCU`` (contract ``bcu``) and its CSR
wrapper ``BCUCSR`` (``bcu_csr``). Layouts are in :mod:`hw.gpushield.layout`."""
from .core import BCU
from .csr import BCUCSR, register_map

__all__ = ["BCU", "BCUCSR", "register_map"]
