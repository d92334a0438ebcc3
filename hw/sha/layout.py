"""Payload layouts of the ``sha384`` streams (docs/sha.md).

Fields are packed in the order given, the first in the lowest bits. Byte *k* of the block
(of the digest) is in bits ``[8k+7:8k]``, so ``int.from_bytes(fips_bytes, "little")`` is the
field value: the block's first big-endian word W[0] is ``int.from_bytes(bytes 0..7, "big")``.
"""
from amaranth.lib import data

__all__ = ["BLOCK_BITS", "DIGEST_BITS", "input_layout", "output_layout"]

BLOCK_BITS = 1024   # one SHA-384 (SHA-512) message block, already padded
DIGEST_BITS = 384   # the first six words of the final chaining value


def input_layout():
    """``{block: 1024, first: 1, last: 1}``: ``first`` starts a message from the initial
    hash value, ``last`` ends it (both may be set: a one-block message)."""
    return data.StructLayout({"block": BLOCK_BITS, "first": 1, "last": 1})


def output_layout():
    """``{digest: 384}``."""
    return data.StructLayout({"digest": DIGEST_BITS})
