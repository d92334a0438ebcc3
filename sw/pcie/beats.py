"""Packet beats of :mod:`hw.sxp.packet` as Python values, and their bus integers.

A :class:`Beat` has ``data`` (an int, byte *k* in bits 8k+7..8k), ``hdr`` (a dict of every
:data:`~hw.sxp.packet.Header` field, ints; ``kind`` an int too), ``first`` and ``last``.
:func:`encode` / :func:`decode` convert to and from the stream payload integer with the
field offsets of the layout itself, so nothing here retypes a bit position.
"""
from dataclasses import dataclass, field

from hw.sxp.packet import Header, Kind, beat_layout

__all__ = ["Beat", "header", "encode", "decode", "HEADER_FIELDS"]

HEADER_FIELDS = tuple(name for name, _ in Header)


def _slices(layout):
    return {name: (f.offset, f.width) for name, f in layout}


_HDR = _slices(Header)
_BEAT = {lanes: _slices(beat_layout(lanes)) for lanes in (1, 2, 4)}


def header(**fields):
    """A full header dict: the given fields, every other one 0."""
    unknown = set(fields) - set(HEADER_FIELDS)
    if unknown:
        raise KeyError(f"no header field {', '.join(sorted(unknown))}")
    hdr = dict.fromkeys(HEADER_FIELDS, 0)
    for name, value in fields.items():
        hdr[name] = value.value if isinstance(value, Kind) else int(value)
    return hdr


@dataclass
class Beat:
    data: int = 0
    hdr: dict = field(default_factory=header)
    first: int = 1
    last: int = 1

    def __repr__(self):
        h = ", ".join(f"{k}={v:#x}" if k == "addr" else f"{k}={v}" for k, v in self.hdr.items())
        return f"Beat(first={self.first}, last={self.last}, {h}, data={self.data:#x})"


def _pack(slices, fields):
    value = 0
    for name, v in fields.items():
        offset, width = slices[name]
        if not 0 <= v < (1 << width):
            raise ValueError(f"field {name} = {v:#x} does not fit in {width} bits")
        value |= v << offset
    return value


def _unpack(slices, value):
    return {name: (value >> off) & ((1 << w) - 1) for name, (off, w) in slices.items()}


def encode(beat, lanes=1):
    """The stream payload integer of *beat*."""
    return _pack(_BEAT[lanes], {"data": beat.data, "hdr": _pack(_HDR, beat.hdr),
                                "first": beat.first, "last": beat.last})


def decode(value, lanes=1):
    """The :class:`Beat` of a stream payload integer."""
    f = _unpack(_BEAT[lanes], int(value))
    return Beat(data=f["data"], hdr=_unpack(_HDR, f["hdr"]), first=f["first"], last=f["last"])
