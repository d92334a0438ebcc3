"""Golden model of the ``rts`` measurement store (docs/rts.md), SHA-384 from hashlib."""
from .model import MeasurementStore, RtsInputError, RtsTypeError, SlotState, Status, extend_block, extend_value

__all__ = ["MeasurementStore", "SlotState", "RtsInputError", "RtsTypeError", "Status", "extend_block",
           "extend_value"]
