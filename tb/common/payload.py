"""Pack and unpack stream payloads with the same ``amaranth.lib.data`` layouts the RTL uses,
so testbenches never retype a bit position: the codec of :mod:`sw.common.payload`, under
the name the testbenches import it by."""
from sw.common.payload import field_slices, pack, unpack

__all__ = ["pack", "unpack", "field_slices"]
