"""Parameters, error causes and table-entry layouts of ``pcie_rdtable`` (docs/pcie.md).

Defined once and shared by the RTL (:mod:`hw.pcie.rdtable`), the golden model
(:mod:`sw.pcie.model`), the host completion generator (:mod:`sw.pcie.host`) and the
testbenches. The packet beats themselves are :func:`hw.sxp.packet.beat_layout`.

Sizes are in bytes. Payloads, addresses and lengths move in granules of one beat,
16 · ``lanes`` bytes (:attr:`Params.granule`; :data:`GRANULE` = 16 bytes, one AES block, is
the granule at ``lanes`` = 1): a read request starts on a granule and asks for a whole
number of granules, and every legal completion carries a whole number of granules. The
table therefore keeps addresses and byte counts in granules, and a granule is one beat.
"""
from amaranth.lib import data, enum

from hw.gcm.layout import CTX_BITS
from hw.sxp.packet import BEAT_BYTES, MAX_FRAME_BYTES, MAX_PAYLOAD_BYTES, TILE_BITS, Header

__all__ = ["Cause", "GRANULE", "GRANULE_BITS", "TAG_BITS", "MAX_ENTRIES", "COUNTER_BITS", "TIMEOUT_BITS",
           "TIMEOUT_STEPS", "RCB_CHOICES", "MAX_PAYLOAD_CHOICES", "MAX_READ_CHOICES",
           "Params", "check_params", "static_layout", "dynamic_layout"]

GRANULE = BEAT_BYTES        # 16 bytes: the unit of addresses and lengths in the table
GRANULE_BITS = GRANULE.bit_length() - 1   # log2(16)
TAG_BITS = Header["tag"].width   # the PCIe tag: 8 bits
MAX_ENTRIES = 1 << TAG_BITS
COUNTER_BITS = 32           # err_count, timeout_count (saturating)
TIMEOUT_BITS = 32           # the `timeout` configuration input, in cycles
TIMEOUT_STEPS = 4           # completion timeout resolution: timeout / 4 (see docs/pcie.md)

RCB_CHOICES = (64, 128)                 # PCIe read-completion boundary
MAX_PAYLOAD_CHOICES = (128, 256)        # PCIe MPS, capped by packet.MAX_PAYLOAD_BYTES
MAX_READ_CHOICES = (128, 256, 512, 1024)  # PCIe MRRS, capped by packet.MAX_FRAME_BYTES
assert max(MAX_PAYLOAD_CHOICES) <= MAX_PAYLOAD_BYTES and max(MAX_READ_CHOICES) <= MAX_FRAME_BYTES


class Cause(enum.Enum, shape=3):
    """Why a completion was dropped (or, for ``FRAMING``, repaired); ``err_cause``.

    When several apply, the lowest number is reported.
    """
    NONE = 0         # no error since reset
    UNKNOWN_TAG = 1  # tag >= entries, not outstanding, finished, or timed out
    OVERRUN = 2      # more bytes than the request still expects
    ADDRESS = 3      # address is not the next byte the request expects
    MALFORMED = 4    # length 0, not a multiple of 16, or above the max payload size
    BOUNDARY = 5     # does not finish the request and does not end on the RCB
    FRAMING = 6      # data beats disagree with the length (truncated / zero-padded)


class Params:
    """Checked parameters of one table (see :func:`check_params`)."""

    def __init__(self, entries, rcb, max_payload, max_read, lanes):
        self.entries, self.rcb, self.max_payload = entries, rcb, max_payload
        self.max_read, self.lanes = max_read, lanes

    @property
    def beat_bytes(self):
        return GRANULE * self.lanes

    @property
    def granule(self):
        """Bytes of the unit of addresses and lengths in the table: one beat, 16 · lanes."""
        return self.beat_bytes

    @property
    def granule_bits(self):
        return self.granule.bit_length() - 1

    @property
    def addr_bits(self):
        """Index width of the table memories (the low bits of the tag)."""
        return (self.entries - 1).bit_length()

    @property
    def units_bits(self):
        """Width of a request's remaining length in granules (0 .. max_read / granule)."""
        return (self.max_read // self.granule).bit_length()

    def beats(self, length):
        """Beats of a completion of *length* bytes (a legal length)."""
        return -(-length // self.beat_bytes)

    def as_dict(self):
        return dict(entries=self.entries, rcb=self.rcb, max_payload=self.max_payload,
                    max_read=self.max_read, lanes=self.lanes)

    def __repr__(self):
        return "Params(" + ", ".join(f"{k}={v}" for k, v in self.as_dict().items()) + ")"


def _int(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}")
    return value


def check_params(entries=256, rcb=64, max_payload=256, max_read=1024, lanes=1):
    """:class:`Params` if every parameter is legal; TypeError for a non-int, ValueError for
    an int out of range:

    - ``entries``: outstanding reads, 2 .. 256 (the 8-bit PCIe tag space);
    - ``rcb``: read-completion boundary, 64 or 128 (the PCIe values);
    - ``max_payload``: max payload size of a completion, 128 or 256 (PCIe MPS values up to
      the 256-byte packets of :mod:`hw.sxp.packet`);
    - ``max_read``: max read request size, 128 .. 1024, a power of two (PCIe MRRS values up
      to the 1 KiB frame);
    - ``lanes``: beat width in 128-bit lanes, 1, 2 or 4 (docs/line-rate.md); ``rcb``
      must be a multiple of the beat (16 · lanes bytes), so that a completion cut at the
      RCB is a whole number of beats.
    """
    for name, value in (("entries", entries), ("rcb", rcb), ("max_payload", max_payload),
                        ("max_read", max_read), ("lanes", lanes)):
        _int(name, value)
    if not 2 <= entries <= MAX_ENTRIES:
        raise ValueError(f"entries must be 2..{MAX_ENTRIES}, not {entries}")
    if rcb not in RCB_CHOICES:
        raise ValueError(f"rcb must be one of {RCB_CHOICES}, not {rcb}")
    if max_payload not in MAX_PAYLOAD_CHOICES:
        raise ValueError(f"max_payload must be one of {MAX_PAYLOAD_CHOICES}, not {max_payload}")
    if max_read not in MAX_READ_CHOICES:
        raise ValueError(f"max_read must be one of {MAX_READ_CHOICES}, not {max_read}")
    if lanes not in (1, 2, 4):
        raise ValueError(f"lanes must be 1, 2 or 4, not {lanes}")
    if rcb % (GRANULE * lanes):
        raise ValueError(f"rcb ({rcb}) must be a multiple of the beat, 16 * lanes = "
                         f"{GRANULE * lanes} bytes")
    return Params(entries, rcb, max_payload, max_read, lanes)


def static_layout():
    """What a request leaves in its table entry for its completions' headers."""
    return data.StructLayout({"tile": TILE_BITS, "key_index": CTX_BITS, "aes": 1})


def dynamic_layout(params):
    """What each completion advances: the next expected address and the bytes still
    expected, both in granules of 16 · lanes bytes (the address without its zero low bits)."""
    return data.StructLayout({"next": Header["addr"].width - params.granule_bits,
                              "left": params.units_bits})
