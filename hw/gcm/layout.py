"""Payload layouts and the op enum of the ``gcm_core`` streams (DESIGN.md § gcm_core).

Defined once and shared by the RTL (:mod:`hw.gcm.core`), the golden model
(:mod:`sw.gcm.model`) and the testbenches. Struct fields are packed in the order written,
the first in the lowest bits. Byte *k* of a block or key sits in bits ``[8k+7:8k]`` (bus
lane order), so ``int.from_bytes(fips_bytes, "little")`` is the field value.

The ``ctx`` field is 4 bits wide whatever the number of physical contexts (the contract
port width; at most 16 contexts). A core built with fewer contexts answers ``err`` for an
op on a context number it does not have and ignores a key install to one.
"""
from amaranth.lib import data, enum

__all__ = ["BLOCK_BITS", "KEY_BITS", "CTX_BITS", "MAX_CONTEXTS", "Op", "check_contexts",
           "key_layout", "input_layout", "output_layout"]

BLOCK_BITS = 128   # one AES block: the beat width (DESIGN.md Roadmap: lanes x 128 later)
KEY_BITS = 256     # AES-256
CTX_BITS = 4       # contract width of the ctx field
MAX_CONTEXTS = 1 << CTX_BITS


class Op(enum.Enum, shape=2):
    IV = 0
    DATA = 1
    MAC = 2


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


input_layout = data.StructLayout({
    "block": BLOCK_BITS,
    "ctx": CTX_BITS,
    "op": Op,
    "decrypt": 1,
})

output_layout = data.StructLayout({
    "block": BLOCK_BITS,
    "ctx": CTX_BITS,
    "op": Op,
    "tag_ok": 1,
    "err": 1,
})
