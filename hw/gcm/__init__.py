"""AES-256-GCM engine ``gcm_core`` (docs/gcm.md): the ``GcmCore`` component, its
GHASH multiplier and the stream layouts shared with the golden model ``sw.gcm``."""
from .core import GcmCore
from .layout import Op, input_layout, key_layout, output_layout

__all__ = ["GcmCore", "Op", "input_layout", "key_layout", "output_layout"]
