"""Packet beats of :mod:`hw.sxp.packet` as Python values, and their bus integers.

A :class:`Beat` has ``data`` (an int, byte *k* in bits 8k+7..8k), ``hdr`` (a dict of every
:data:`~hw.sxp.packet.Header` field, ints; ``kind`` an int too, see :func:`header`),
``first`` and ``last``. :func:`encode` / :func:`decode` convert to and from the stream
payload integer with :mod:`sw.common.payload` and the layout itself, so nothing here
retypes a bit position.
"""
from dataclasses import dataclass, field

from hw.sxp.packet import Header, beat_layout
from sw.common.packet import HEADER_FIELDS, header
from sw.common.payload import pack, unpack

__all__ = ["Beat", "header", "encode", "decode", "HEADER_FIELDS"]

_BEAT = {lanes: beat_layout(lanes) for lanes in (1, 2, 4)}


@dataclass
class Beat:
    data: int = 0
    hdr: dict = field(default_factory=header)
    first: int = 1
    last: int = 1

    def __repr__(self):
        h = ", ".join(f"{k}={v:#x}" if k == "addr" else f"{k}={v}" for k, v in self.hdr.items())
        return f"Beat(first={self.first}, last={self.last}, {h}, data={self.data:#x})"


def encode(beat, lanes=1):
    """The stream payload integer of *beat*."""
    return pack(_BEAT[lanes], data=beat.data, hdr=beat.hdr, first=beat.first, last=beat.last)


def decode(value, lanes=1):
    """The :class:`Beat` of a stream payload integer."""
    f = unpack(_BEAT[lanes], value)
    return Beat(data=f["data"], hdr=unpack(Header, f["hdr"], enums=False), first=f["first"], last=f["last"])
