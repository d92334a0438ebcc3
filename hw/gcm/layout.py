"""Payload layouts and the op enum of the ``gcm_core`` streams (docs/gcm.md).

Defined once and shared by the RTL (:mod:`hw.gcm.core`), the golden model
(:mod:`sw.gcm.model`) and the testbenches. Struct fields are packed in the order written,
the first in the lowest bits. Byte *k* of a block or key sits in bits ``[8k+7:8k]`` (bus
lane order), so ``int.from_bytes(fips_bytes, "little")`` is the field value.

A beat of a core built with ``lanes`` = L carries L consecutive blocks of one frame in its
``block`` field: lane *k* (bits ``128k+127..128k``) is the block at byte offset 16·k of
the beat. L = 1 is the original one-block contract.

The ``ctx`` field is 4 bits wide whatever the number of physical contexts (the contract
port width; at most 16 contexts). A core built with fewer contexts answers ``err`` for an
op on a context number it does not have and ignores a key install to one.
"""
from amaranth.lib import data, enum

from hw.aes.layout import BLOCK_BITS, KEY_BITS, LANES, check_lanes

__all__ = ["BLOCK_BITS", "KEY_BITS", "CTX_BITS", "MAX_CONTEXTS", "LANES", "Op",
           "check_contexts", "check_lanes", "key_layout", "input_layout", "output_layout"]

# BLOCK_BITS (one AES block: a beat is lanes x 128 bits) and KEY_BITS (AES-256) are
# hw.aes.layout's, re-exported here for the blocks built on gcm_core
CTX_BITS = 4       # contract width of the ctx field
MAX_CONTEXTS = 1 << CTX_BITS


class Op(enum.Enum, shape=2):
    IV = 0      # opens a frame: lane 0 is J0, lanes 1.. the first data blocks
    DATA = 1    # every lane a data block
    MAC = 2     # lane L-1 the tag slot, lanes before it the last data blocks
    NOP = 3     # passes the beat through unchanged; no context is read or written


def check_contexts(contexts):
    """*contexts* if it is an int in 1..16, else ValueError."""
    if isinstance(contexts, bool) or not isinstance(contexts, int) or \
            not 1 <= contexts <= MAX_CONTEXTS:
        raise ValueError(f"contexts must be an int in 1..{MAX_CONTEXTS}, not {contexts!r}")
    return contexts


def key_layout(contexts=MAX_CONTEXTS):
    """``{ctx: 4, key: 256}`` — the ``key`` stream (install a key in a context)."""
    check_contexts(contexts)
    return data.StructLayout({"ctx": CTX_BITS, "key": KEY_BITS})


def input_layout(lanes=1):
    """``{block: 128·lanes, ctx: 4, op: 2, decrypt: 1}`` — the ``i`` stream."""
    return data.StructLayout({
        "block": BLOCK_BITS * check_lanes(lanes),
        "ctx": CTX_BITS,
        "op": Op,
        "decrypt": 1,
    })


def output_layout(lanes=1):
    """``{block: 128·lanes, ctx: 4, op: 2, tag_ok: 1, err: 1}`` — the ``o`` stream."""
    return data.StructLayout({
        "block": BLOCK_BITS * check_lanes(lanes),
        "ctx": CTX_BITS,
        "op": Op,
        "tag_ok": 1,
        "err": 1,
    })
