"""Layouts and enums of the ``bcu`` (docs/gpushield.md), defined once.

The RTL (:mod:`hw.gpushield.core`), the golden model and driver shim (:mod:`sw.gpushield`)
and the testbenches (:mod:`tb.gpushield`) all take bit positions from here. Struct fields
are packed in the order written, the first in the lowest bits.

- :data:`pointer_layout` — a 64-bit tagged pointer: ``addr`` bits 47..0, ``meta`` bits 61..48
  (the encrypted buffer id of a Type 2 pointer, or ``log2_size`` bits 53..48 and
  ``reserved`` bits 61..54 of a Type 3 pointer), ``type`` bits 63..62.
- :data:`rbt_entry_layout` — one 128-bit Region Bounds Table entry (16 bytes in GPU memory).
- :func:`req_layout` / :data:`resp_layout` / :data:`mem_req_layout` / :data:`mem_resp_layout` — stream payloads.
- :func:`log_layout` — the ``log_first`` output (our choice; see docs/gpushield.md).
- :data:`cache_entry_layout` — what one RCache entry keeps besides its tag (RTL internal, and the
  storage figure of the benchmark).
- :func:`span_layout` / :func:`uop_layout` / :func:`check_layout` — what flows between the
  RTL's pipeline stages (internal; see hw/gpushield/core.py).
"""
from amaranth.lib import data, enum
from amaranth.utils import bits_for

__all__ = ["VA_BITS", "ID_BITS", "HALF_BITS", "KEY_BITS", "TAG_BITS", "KERNEL_ID_BITS",
           "SIZE_BITS", "COUNTER_BITS", "RBT_ENTRIES", "RBT_ENTRY_BYTES", "RBT_BYTES", "RBT_ALIGN_BITS",
           "MAX_LANES", "MAX_SLOTS", "SLOT_BITS", "check_slots",
           "PtrType", "Cause", "t3_meta_layout", "pointer_layout", "rbt_entry_layout",
           "cache_entry_layout", "resp_layout", "mem_req_layout", "mem_resp_layout", "check_lanes",
           "lane_bits", "req_layout", "log_layout", "span_layout", "uop_layout", "check_layout"]

VA_BITS = 48            # virtual address bits of a pointer
ID_BITS = 14            # buffer id: 16,384 RBT entries
HALF_BITS = ID_BITS // 2  # a Feistel half
KEY_BITS = 64           # per-launch id key
TAG_BITS = 16           # request tag
KERNEL_ID_BITS = 12
SIZE_BITS = 32          # buffer size in an RBT entry
COUNTER_BITS = 32
RBT_ENTRIES = 1 << ID_BITS
RBT_ENTRY_BYTES = 16
RBT_BYTES = RBT_ENTRIES * RBT_ENTRY_BYTES   # 256 KiB: the range a store may never write
RBT_ALIGN_BITS = 18                         # log2 RBT_BYTES: the driver aligns rbt_base to it
MAX_LANES = 64
MAX_SLOTS = 4           # kernel slots per unit (concurrent kernels)
SLOT_BITS = 2           # a slot number, in micro-ops and cache tags (constant width)


class PtrType(enum.Enum, shape=2):
    """Pointer bits 63..62."""
    T1 = 0       # proven safe by the compiler: not checked
    T2 = 1       # bits 61..48 = encrypted 14-bit buffer id: RBT lookup
    T3 = 2       # bits 53..48 = log2 buffer size, buffer aligned to its size: no lookup
    INVALID = 3


class Cause(enum.Enum, shape=3):
    """``resp.cause`` and the cause in ``log_first``."""
    NONE = 0
    OUT_OF_BOUNDS = 1
    READ_ONLY = 2        # store to a read-only buffer
    KERNEL = 3           # the entry belongs to another kernel
    INVALID_ENTRY = 4    # the entry's valid bit is clear
    POINTER_TYPE = 5     # a lane of invalid type, or of a type other than base's
    RBT_STORE = 6        # a store lane into an active slot's Region Bounds Table


t3_meta_layout = data.StructLayout({"log2_size": 6, "reserved": 8})

pointer_layout = data.StructLayout({
    "addr": VA_BITS,
    "meta": data.UnionLayout({"id": ID_BITS, "t3": t3_meta_layout}),
    "type": PtrType,
})

rbt_entry_layout = data.StructLayout({
    "base": VA_BITS,            # bits 47..0
    "size": SIZE_BITS,          # bits 79..48
    "valid": 1,                 # bit 80
    "read_only": 1,             # bit 81
    "kernel_id": KERNEL_ID_BITS,  # bits 93..82
    "reserved": 128 - 94,       # zero; ignored by the BCU
})

# An RCache entry: the RBT entry with the kernel id already compared against the launch's
# (the caches are flushed at every launch, so the comparison stays valid while cached).
cache_entry_layout = data.StructLayout({
    "base": VA_BITS,
    "size": SIZE_BITS,
    "valid": 1,
    "read_only": 1,
    "kernel_ok": 1,
})

resp_layout = data.StructLayout({"tag": TAG_BITS, "ok": 1, "cause": Cause})
mem_req_layout = data.StructLayout({"addr": VA_BITS})
mem_resp_layout = data.StructLayout({"data": 128})


def check_lanes(lanes):
    """*lanes* if it is an int in 1..64, else TypeError / ValueError."""
    if isinstance(lanes, bool) or not isinstance(lanes, int):
        raise TypeError(f"lanes must be an int, not {lanes!r}")
    if not 1 <= lanes <= MAX_LANES:
        raise ValueError(f"lanes must be in 1..{MAX_LANES}, not {lanes}")
    return lanes


def check_slots(slots):
    """*slots* if it is an int in 1..:data:`MAX_SLOTS`, else TypeError / ValueError."""
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise TypeError(f"slots must be an int, not {slots!r}")
    if not 1 <= slots <= MAX_SLOTS:
        raise ValueError(f"slots must be in 1..{MAX_SLOTS}, not {slots}")
    return slots


def lane_bits(lanes):
    """Width of a lane number."""
    return max(1, bits_for(check_lanes(lanes) - 1))


def req_layout(lanes=32):
    """The ``req`` payload: ``{base: 64, addr: 64 x lanes, mask: lanes, size_log2: 2,
    store: 1, tag: 16}``; lane *k*'s pointer in bits ``64k+63..64k`` of ``addr``."""
    check_lanes(lanes)
    return data.StructLayout({
        "base": pointer_layout,
        "addr": data.ArrayLayout(pointer_layout, lanes),
        "mask": lanes,
        "size_log2": 2,
        "store": 1,
        "tag": TAG_BITS,
    })


def log_layout(lanes=32):
    """``log_first``: the first violation since reset or the last launch —
    ``{tag: 16, cause: 3, lane: log2 lanes, addr: 48}`` (72 bits for 32 lanes). ``addr``
    is the virtual address of the offending lane (see docs/gpushield.md for which lane)."""
    return data.StructLayout({"tag": TAG_BITS, "cause": Cause, "lane": lane_bits(lanes),
                              "addr": VA_BITS})


# ---------------------------------------------------------------- RTL pipeline (internal)
def span_layout(lanes=32):
    """A group's address span so far: ``any`` lane, the lowest address and its lane, the
    highest address and its lane (ties: the lowest lane)."""
    lb = lane_bits(lanes)
    return data.StructLayout({"any": 1, "lo": VA_BITS, "lane_lo": lb, "hi": VA_BITS, "lane_hi": lb})


def _op_fields(lanes):
    # what the comparator and the log need of a micro-op (one lane group of one request)
    lb = lane_bits(lanes)
    return {
        "lookup": 1,            # a Type 2 group: check against its RBT entry
        "cause": Cause,         # the cause when no lookup is needed (type error, Type 3)
        "lo": VA_BITS,          # lowest lane address (for a failing Type 3: the one to log)
        "lane_lo": lb,
        "hi": VA_BITS,          # highest lane address
        "lane_hi": lb,
        "size_log2": 2,
        "store": 1,
        "tag": TAG_BITS,
        "last": 1,              # the request's last micro-op: answer
        "slot": SLOT_BITS,      # the kernel slot the request named (the RCache tag with eid;
                                # the answer's slot picks the violation log)
    }


def uop_layout(lanes=32):
    """A micro-op as the front pipeline hands it to the RCache engine."""
    return data.StructLayout({
        **_op_fields(lanes),
        "eid": ID_BITS,         # encrypted id: the RCache tag (with slot)
        "dec_part": ID_BITS,    # the id after decryption rounds 3, 2, 1 (round 0 runs in the engine)
        "stale": 1,             # accepted before a launch: do not fill the flushed caches
    })


def check_layout(lanes=32):
    """A micro-op with the RCache entry it is checked against (engine → comparator)."""
    return data.StructLayout({**_op_fields(lanes), "entry": cache_entry_layout})
