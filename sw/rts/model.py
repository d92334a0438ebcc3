"""Golden model of the ``rts`` measurement store (docs/rts.md), SHA-384 from hashlib.

:class:`MeasurementStore` keeps *slots* slots of a 48-byte value, an owner id, a ``bound``
flag and an extend count. :meth:`~MeasurementStore.extend` is the only way to change a slot:
``new = SHA-384(old ‖ value)``; the first extend of a slot binds it to its owner, and an
extend by another owner is refused (the slot is unchanged, :attr:`~MeasurementStore.refused`
counts it) — a refusal is a normal outcome the hardware answers with
``Status.REFUSED_OWNER``, so the model returns that status rather than raising.

Bad inputs — a request the hardware's ports cannot even carry — raise :class:`RtsInputError`
(a ValueError): a slot outside ``0..slots-1``, a value that is not 48 bytes, an owner id
outside ``0..2^owner_bits-1``. Wrong types among them raise :class:`RtsTypeError` (also a
TypeError).

Byte order as on the RTL's ports: byte *k* of a value is byte *k* of the ``bytes`` here and
``int.from_bytes(value, "little")`` is the port's field.
"""
import hashlib
import operator
from dataclasses import dataclass

from hw.rts.layout import COUNT_BITS, OWNER_BITS, VALUE_BYTES, Status

__all__ = ["MeasurementStore", "SlotState", "RtsInputError", "RtsTypeError", "extend_block",
           "extend_value", "Status", "VALUE_BYTES"]

COUNT_MAX = (1 << COUNT_BITS) - 1


class RtsInputError(ValueError):
    """A request the store's ports cannot carry: wrong slot, wrong value width, owner id
    out of range (or, as :class:`RtsTypeError`, of the wrong type)."""


class RtsTypeError(RtsInputError, TypeError):
    """A slot, owner or value of the wrong type (a float, a string for bytes, ...)."""


@dataclass(frozen=True)
class SlotState:
    """One slot as the RTR's read port shows it."""
    value: bytes = bytes(VALUE_BYTES)
    owner: int = 0
    bound: bool = False
    count: int = 0


def _value(value):
    if not isinstance(value, (bytes, bytearray)):
        raise RtsTypeError(f"a measurement is bytes, not {type(value).__name__}")
    if len(value) != VALUE_BYTES:
        raise RtsInputError(f"a measurement is {VALUE_BYTES} bytes, not {len(value)}")
    return bytes(value)


def extend_value(old: bytes, value: bytes) -> bytes:
    """``SHA-384(old ‖ value)`` (hashlib)."""
    return hashlib.sha384(_value(old) + _value(value)).digest()


def extend_block(old: bytes, value: bytes) -> bytes:
    """The one padded 128-byte block the store's engine hashes for an extend: ``old ‖ value``
    (96 bytes), 0x80, 15 zero bytes, the length 768 as a 128-bit big-endian integer."""
    return _value(old) + _value(value) + b"\x80" + bytes(15) + (2 * VALUE_BYTES * 8).to_bytes(16, "big")


class MeasurementStore:
    """The store after a cold reset: every slot zero, unbound, count 0."""

    def __init__(self, slots=64, owner_bits=OWNER_BITS):
        for name, v in (("slots", slots), ("owner_bits", owner_bits)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int, not {v!r}")
        if not 2 <= slots <= 1024 or slots & (slots - 1):
            raise ValueError(f"slots must be a power of two in 2..1024, not {slots}")
        if not 1 <= owner_bits <= 16:
            raise ValueError(f"owner_bits must be in 1..16, not {owner_bits}")
        self.slots, self.owner_bits = slots, owner_bits
        self.reset()

    def reset(self):
        """Cold reset (``rst``): every slot zero and unbound, the refusal counter zero. There
        is no FLR here: a function-level reset leaves the store alone (docs/rts.md)."""
        self._slots = [SlotState() for _ in range(self.slots)]
        self.refused = 0

    def _index(self, v, limit, what):
        if isinstance(v, bool):
            raise RtsTypeError(f"{what} must be an int, not {v!r}")
        try:
            v = operator.index(v)
        except TypeError as e:
            raise RtsTypeError(f"{what} must be an int, not {v!r}") from e
        if not 0 <= v < limit:
            raise RtsInputError(f"{what} {v} out of range 0..{limit - 1}")
        return v

    def extend(self, slot, owner, value: bytes) -> Status:
        """Extend *slot* by *value* for *owner*: ``Status.OK`` (the slot is now
        ``SHA-384(old ‖ value)``, bound to *owner*, its count one up, saturating) or
        ``Status.REFUSED_OWNER`` (bound to another owner: unchanged, counted)."""
        slot = self._index(slot, self.slots, "slot")
        owner = self._index(owner, 1 << self.owner_bits, "owner")
        value = _value(value)
        old = self._slots[slot]
        if old.bound and old.owner != owner:
            self.refused = min(self.refused + 1, COUNT_MAX)
            return Status.REFUSED_OWNER
        self._slots[slot] = SlotState(extend_value(old.value, value), owner, True, min(old.count + 1, COUNT_MAX))
        return Status.OK

    def read(self, slot) -> SlotState:
        """The slot as the RTR reads it."""
        return self._slots[self._index(slot, self.slots, "slot")]
