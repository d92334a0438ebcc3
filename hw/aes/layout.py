"""Payload layouts of the ``aes256`` streams (docs/aes.md).

Fields are packed in the order block, key, meta, the first in the lowest bits. Byte *k*
of the block (or key) is in bits ``[8k+7:8k]`` (bus lane order), so
``int.from_bytes(fips_bytes, "little")`` is the field value. With *lanes* = L the block
field is L blocks side by side (lane *k* in bits ``128k+127..128k``), all under one key.
"""
from amaranth.hdl import Shape
from amaranth.lib import data

__all__ = ["BLOCK_BITS", "KEY_BITS", "LANES", "check_lanes", "check_meta", "input_layout",
           "output_layout"]

BLOCK_BITS = 128  # one AES block; a beat of L lanes is L blocks side by side
KEY_BITS = 256    # AES-256
LANES = (1, 2, 4)  # blocks per beat that the pipelines are built for


def check_lanes(lanes):
    """*lanes* if it is 1, 2 or 4, else ValueError."""
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes not in LANES:
        raise ValueError(f"lanes must be one of {LANES}, not {lanes!r}")
    return lanes


def check_meta(meta):
    """*meta* unchanged if it is ``None`` or castable to an Amaranth shape, else TypeError."""
    if meta is None:
        return None
    # bool is an int, and Shape.cast would take True as unsigned(1): surely a mistake.
    if isinstance(meta, bool):
        raise TypeError(f"meta must be an Amaranth shape, a shape-castable or None, not {meta!r}")
    try:
        Shape.cast(meta)
    except (TypeError, ValueError) as error:
        raise TypeError(f"meta must be an Amaranth shape, a shape-castable or None: "
                        f"{error}") from error
    return meta


def input_layout(meta=None, lanes=1):
    """``{block: 128·lanes, key: 256}``, plus ``meta`` when *meta* is a shape."""
    fields = {"block": BLOCK_BITS * check_lanes(lanes), "key": KEY_BITS}
    if check_meta(meta) is not None:
        fields["meta"] = meta
    return data.StructLayout(fields)


def output_layout(meta=None, lanes=1):
    """``{block: 128·lanes}``, plus ``meta`` when *meta* is a shape."""
    fields = {"block": BLOCK_BITS * check_lanes(lanes)}
    if check_meta(meta) is not None:
        fields["meta"] = meta
    return data.StructLayout(fields)
