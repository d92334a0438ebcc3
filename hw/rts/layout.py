"""Enums and payload layouts of the ``rts`` measurement store (docs/rts.md). Defined once;
the RTL (:mod:`hw.rts.core`), the golden model (:mod:`sw.rts.model`), the testbench and the
formal harness import them.

Fields are packed in the order given, the first in the lowest bits. Measurements are in bus
lane order as on every port of the project (docs/sha.md): byte *k* of a 48-byte
measurement is in bits ``[8k+7:8k]``, so a field's value is ``int.from_bytes(b, "little")``.
"""
from amaranth.lib import data, enum

__all__ = ["Status", "VALUE_BITS", "VALUE_BYTES", "COUNT_BITS", "OWNER_BITS",
           "extend_layout", "extend_resp_layout", "read_layout", "slot_layout"]

VALUE_BITS = 384        # a measurement: one SHA-384 digest
VALUE_BYTES = VALUE_BITS // 8
COUNT_BITS = 32         # extends a slot has taken, saturating at 2^32 - 1
OWNER_BITS = 8          # default width of an RTM owner id


class Status(enum.Enum, shape=2):
    """The answer to an extend request (``resp.status``)."""
    OK = 0              # extended: the slot holds SHA-384(old ‖ value), bound to the owner
    REFUSED_OWNER = 1   # the slot is bound to another owner: nothing changed, counted


def extend_layout(slot_bits, owner_bits=OWNER_BITS):
    """``{slot, owner, value: 384}``: extend *slot* by *value* on behalf of RTM *owner*."""
    return data.StructLayout({"slot": slot_bits, "owner": owner_bits, "value": VALUE_BITS})


def extend_resp_layout(slot_bits):
    """``{slot, status}``: one per extend request, in order."""
    return data.StructLayout({"slot": slot_bits, "status": Status})


def read_layout(slot_bits):
    """``{slot}``: a read request of the RTR."""
    return data.StructLayout({"slot": slot_bits})


def slot_layout(owner_bits=OWNER_BITS):
    """``{value: 384, owner, bound: 1, count: 32}``: one slot as stored and as read. ``bound``:
    the slot has an owner (its first extend bound it); ``count``: its extends (saturating)."""
    return data.StructLayout({"value": VALUE_BITS, "owner": owner_bits, "bound": 1, "count": COUNT_BITS})
