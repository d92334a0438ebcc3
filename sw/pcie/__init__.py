"""Golden model and host-side completion generator of ``pcie_rdtable`` (DESIGN.md §
pcie_rdtable, docs/pcie.md)."""
from .beats import Beat, PacketError, PacketTypeError, check_beat, check_packet, decode, encode, header
from .host import all_splits, completion_packets, count_splits, is_legal_split, random_split
from .model import AGE_EXPIRED, CheckRegister, ModelError, RdTableModel, timeout_bounds

__all__ = ["Beat", "decode", "encode", "header", "PacketError", "PacketTypeError", "check_beat", "check_packet",
           "all_splits", "completion_packets",
           "count_splits", "is_legal_split", "random_split", "AGE_EXPIRED", "ModelError",
           "RdTableModel", "timeout_bounds", "CheckRegister"]
