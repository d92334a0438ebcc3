"""Enums and payload layouts of the H100-style confidential-computing blocks ``cc_ctrl``
and ``cc_dma`` (docs/cc.md). Defined once; the RTL (:mod:`hw.cc.ctrl`, :mod:`hw.cc.dma`),
the golden models (:mod:`sw.cc.model`), the host shim (:mod:`sw.cc.host`) and the
testbenches import them.

Blocks and keys are in bus lane order (byte *k* in bits ``8k+7..8k``), as everywhere.
"""
from amaranth.lib import data, enum

from hw.gcm.layout import BLOCK_BITS, CTX_BITS, KEY_BITS

__all__ = ["Mode", "Src", "Dir", "Status", "MODE_BITS", "CTR_BITS", "CTR_LIMIT", "IV_TAIL",
           "BLOCK_BITS", "KEY_BITS", "CTX_BITS", "LEN_BITS", "DESC_TAG_BITS",
           "iv_layout", "mem_req_layout", "mem_resp_layout", "desc_layout", "status_layout",
           "dma_key_layout", "rd_req_layout", "rd_resp_layout", "wr_layout"]


class Mode(enum.Enum, shape=2):
    """The CC mode (the H100's EEPROM CC control bit, modelled as a 2-bit code).
    Code 3 is not a mode: a mode store loaded with it at power-on acts as ``ON``
    (fail secure) and a host write of it is ignored."""
    OFF = 0
    ON = 1
    DEVTOOLS = 2


MODE_BITS = 2


class Src(enum.Enum, shape=2):
    """Initiator of a memory access seen by the ``cc_ctrl`` firewall."""
    HOST = 0      # PCIe (host, hypervisor): untrusted in CC on/devtools
    DMA = 1       # the cc_dma engine: may write outside the protected region (it encrypts)
    ENGINE = 2    # any other engine (compute, copy, video): must stay inside in CC on


class Dir(enum.Enum, shape=1):
    """Direction of a ``cc_dma`` descriptor."""
    OUT = 0       # protected memory -> bounce buffer, encrypt (device to host, D2H)
    IN = 1        # bounce buffer -> protected memory, decrypt and authenticate (H2D)


class Status(enum.Enum, shape=4):
    """``cc_dma`` completion codes (``status.code``)."""
    OK = 0
    REGION = 1        # source or destination range not inside its allowed region
    LENGTH = 2        # len = 0 or len > frame_blocks
    CHANNEL = 3       # ch >= channels
    NO_KEY = 4        # no key installed on the channel
    IV_EXHAUSTED = 5  # the channel's outbound IV counter reached 2^32 - 1: install a new key
    BAD_IV = 6        # inbound IV block not of this channel / direction / layout
    REPLAY = 7        # inbound IV counter below the next acceptable one
    AUTH = 8          # inbound tag mismatch: nothing of the frame was written
    ENGINE = 9        # gcm_core answered err (cannot happen by construction; kept defined)


# ---------------------------------------------------------------------------- cc_dma
CTR_BITS = 32                       # per-channel IV counter
CTR_LIMIT = (1 << CTR_BITS) - 1     # never used: reaching it means "exhausted"
IV_TAIL = 0x0100_0000               # bytes 12..15 = 00 00 00 01 (gcm_core's J0 tail)
LEN_BITS = 16                       # descriptor length field (data blocks)
DESC_TAG_BITS = 8

# The 16-byte IV block at the head of every bounce-buffer frame (= gcm_core's J0):
# bytes 0..3 counter (little-endian), byte 4 direction (0 device->host, 1 host->device),
# byte 5 channel, bytes 6..11 zero, bytes 12..15 = 00 00 00 01.
iv_layout = data.StructLayout({
    "ctr": CTR_BITS,
    "dir": 8,
    "ch": 8,
    "zero": 48,
    "tail": 32,
})
assert iv_layout.size == BLOCK_BITS

dma_key_layout = data.StructLayout({
    "ch": CTX_BITS,
    "key": KEY_BITS,
    "iv": CTR_BITS,     # first IV counter under this key, both directions
})


def desc_layout(addr_bits):
    """``{dir, ch, len, src, dst, tag}``: copy *len* data blocks as one frame. Addresses
    are block (16-byte) addresses of *addr_bits* bits."""
    return data.StructLayout({
        "dir": Dir,
        "ch": CTX_BITS,
        "len": LEN_BITS,
        "src": addr_bits,
        "dst": addr_bits,
        "tag": DESC_TAG_BITS,
    })


status_layout = data.StructLayout({
    "tag": DESC_TAG_BITS,
    "code": Status,
    "ctr": CTR_BITS,    # the frame's IV counter (OUT: the one used; IN: the one received)
})


def rd_req_layout(addr_bits):
    return data.StructLayout({"addr": addr_bits})


rd_resp_layout = data.StructLayout({"data": BLOCK_BITS})


def wr_layout(addr_bits):
    return data.StructLayout({"addr": addr_bits, "data": BLOCK_BITS})


# ---------------------------------------------------------------------------- cc_ctrl
def mem_req_layout(addr_bits):
    """A one-word (128-bit) access to the device memory behind the firewall."""
    return data.StructLayout({"src": Src, "addr": addr_bits, "write": 1, "data": BLOCK_BITS})


mem_resp_layout = data.StructLayout({"data": BLOCK_BITS, "ok": 1})
