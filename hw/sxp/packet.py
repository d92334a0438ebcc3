"""Exchange packets between tiles, the SXP and the PCIe complex (docs/sxp.md).

Defined once here and used by the SXP, the PCIe read lookup table, the golden models and
the testbenches. A packet travels as a stream of beats (:func:`beat_layout`): each beat
carries ``data`` (128 bits × ``lanes``, byte *k* of the beat in bits 8k+7..8k), the packet
``hdr`` (repeated on every beat and constant within a packet, so a block never has to hold a
header beat back), and ``first``/``last`` flags. A packet without payload (a read request)
is one beat with ``first`` = ``last`` = 1 whose ``data`` is ignored.

Header fields:

- ``kind``: :class:`Kind`.
- ``tile``: source tile of a request, destination tile of a completion (11 bits: 1472 tiles).
- ``xbctx``: exchange-block context of a request (4 bits); the SXP maps it to a key context.
- ``addr``: tile PCI byte address. Of a request, its first byte; of a completion, the
  first byte this completion carries.
- ``length``: bytes. Of a write request or a completion, the payload bytes of this packet
  (16..256, a multiple of 16); of a read request, the bytes requested (16..1024).
- ``aes``: the payload belongs to an encrypted frame.
- ``cc``: the last packet of a frame (write requests: set by the tile; completions: set by
  the PCIe complex on the completion that finishes the read).
- ``key_index``: physical key context (4 bits), written by the SXP into requests and by the
  PCIe complex into completions; never trusted from the host.
- ``tag``: PCIe tag of a read request and its completions (8 bits).
"""
from amaranth.lib import data, enum

from hw.aes.layout import BLOCK_BITS
from hw.gcm.layout import CTX_BITS

__all__ = ["Kind", "Header", "beat_layout", "TILES", "TILE_BITS", "MAX_FRAME_BYTES",
           "MAX_PAYLOAD_BYTES", "READ_COMPLETION_BOUNDARY", "BEAT_BYTES"]

TILES = 1472
TILE_BITS = 11
MAX_FRAME_BYTES = 1024          # a frame (IV + data + tag) and the largest PCIe read
MAX_PAYLOAD_BYTES = 256         # largest write request / completion payload
READ_COMPLETION_BOUNDARY = 64   # completions split at 64-byte aligned addresses (default)
BEAT_BYTES = BLOCK_BITS // 8    # bytes of one lane of a beat


class Kind(enum.Enum, shape=2):
    WRITE_REQ = 0
    READ_REQ = 1
    READ_CPL = 2


Header = data.StructLayout({
    "kind": Kind,
    "tile": TILE_BITS,
    "xbctx": 4,
    "addr": 32,
    "length": 11,
    "aes": 1,
    "cc": 1,
    "key_index": CTX_BITS,
    "tag": 8,
})


def beat_layout(lanes=1):
    """One beat of a packet: ``data`` (``BLOCK_BITS`` × *lanes*), ``hdr``, ``first``, ``last``."""
    if not isinstance(lanes, int) or lanes not in (1, 2, 4):
        raise ValueError(f"lanes must be 1, 2 or 4, not {lanes!r}")
    return data.StructLayout({"data": BLOCK_BITS * lanes, "hdr": Header, "first": 1, "last": 1})
