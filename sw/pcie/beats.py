"""Packet beats of :mod:`hw.sxp.packet` as Python values, and their bus integers.

A :class:`Beat` has ``data`` (an int, byte *k* in bits 8k+7..8k), ``hdr`` (a dict of every
:data:`~hw.sxp.packet.Header` field, ints; ``kind`` an int too, see :func:`header`),
``first`` and ``last``. :func:`encode` / :func:`decode` convert to and from the stream
payload integer with :mod:`sw.common.payload` and the layout itself, so nothing here
retypes a bit position.

Errors: :func:`encode` and :func:`decode` raise :mod:`sw.common.payload`'s errors
(:class:`~sw.common.payload.PayloadError`, a ValueError, and its TypeError/KeyError
subclasses) for a beat or integer that does not fit the layout, and PayloadError for
*lanes* other than 1, 2, 4. :func:`check_beat` and :func:`check_packet` raise
:class:`PacketError` for a beat or packet (list of beats) that is not well formed.
"""
from dataclasses import dataclass, field

from hw.sxp.packet import BEAT_BYTES, Header, beat_layout
from sw.common.packet import HEADER_FIELDS, header
from sw.common.payload import PayloadError, PayloadTypeError, pack, unpack

__all__ = ["Beat", "header", "encode", "decode", "HEADER_FIELDS", "PacketError", "PacketTypeError",
           "check_beat", "check_packet"]

_BEAT = {lanes: beat_layout(lanes) for lanes in (1, 2, 4)}


def _layout(lanes):
    layout = _BEAT.get(lanes) if type(lanes) is int else None
    if layout is None:
        raise PayloadError(f"lanes must be 1, 2 or 4, not {lanes!r}")
    return layout


def _beat_bytes(lanes):
    _layout(lanes)
    return BEAT_BYTES * lanes


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
    if not isinstance(beat, Beat):
        raise PayloadTypeError(f"{beat!r} is not a Beat")
    return pack(_layout(lanes), data=beat.data, hdr=beat.hdr, first=beat.first, last=beat.last)


def decode(value, lanes=1):
    """The :class:`Beat` of a stream payload integer."""
    f = unpack(_layout(lanes), value)
    return Beat(data=f["data"], hdr=unpack(Header, f["hdr"], enums=False), first=f["first"], last=f["last"])


class PacketError(ValueError):
    """A packet (list of beats) that is not well formed: see :func:`check_packet`."""


class PacketTypeError(PacketError, TypeError):
    """A packet that is not a list of :class:`~sw.pcie.beats.Beat` at all."""


def check_beat(beat, lanes=1, hdr=True, what="beat"):
    """Raise :class:`PacketError` unless *beat* is a :class:`Beat` whose data is an int of
    16·*lanes* bytes, whose ``first`` and ``last`` are 0 or 1 and (with *hdr*) whose header
    is a dict of every field, each in range (:class:`PacketTypeError` if it is no Beat)."""
    beat_bytes = _beat_bytes(lanes)
    if not isinstance(beat, Beat):
        raise PacketTypeError(f"{what} is a {type(beat).__name__}, not a Beat")
    if type(beat.data) is not int or not 0 <= beat.data < 1 << 8 * beat_bytes:
        raise PacketError(f"{what}: data {beat.data!r} is not a {beat_bytes}-byte int")
    if beat.first not in (0, 1) or beat.last not in (0, 1):
        raise PacketError(f"{what}: first/last {beat.first!r}/{beat.last!r} are not bits")
    if hdr:
        h = beat.hdr
        if not isinstance(h, dict) or h.keys() != set(HEADER_FIELDS):
            raise PacketError(f"{what}: the header is not a dict of the fields {HEADER_FIELDS}: {h!r}")
        try:
            header(**h)
        except PayloadError as e:
            raise PacketError(f"{what}: bad header: {e}") from None


def check_packet(packet, lanes=1):
    """Raise :class:`PacketError` unless *packet* is a non-empty list (or tuple) of
    :class:`Beat` (:func:`check_beat`; only the first beat's header is checked: receivers
    ignore the others) (:class:`PacketTypeError` if it is not a list of Beats)."""
    if not isinstance(packet, (list, tuple)):
        raise PacketTypeError(f"a packet is a list of Beat, not {packet!r}")
    if not packet:
        raise PacketError("an empty packet (no beats)")
    for i, b in enumerate(packet):
        check_beat(b, lanes, hdr=i == 0, what=f"beat {i}")
