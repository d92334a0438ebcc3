"""Golden model of the ``gcm_core`` AES-256-GCM engine (docs/gcm.md)."""
from .model import GcmCoreModel, Op, gf128_mul, ghash_mul_bus, j0_block, len_block

__all__ = ["GcmCoreModel", "Op", "gf128_mul", "ghash_mul_bus", "j0_block", "len_block"]
