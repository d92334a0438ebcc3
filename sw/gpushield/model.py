"""Golden model of the GPUShield ``bcu`` (DESIGN.md § bcu; decisions in docs/gpushield.md).

- the id cipher (:func:`encrypt_id`, :func:`decrypt_id`), which the driver shim uses too;
- pointers and RBT entries, packed with the layouts of :mod:`hw.gpushield.layout`;
- :class:`WarpRequest`, the ``req`` payload;
- :class:`BCUModel`: the functional result of every request (ok, cause, the logged lane
  and address), the kernel slots (each with its own configuration, active bit and violation
  log; RBT-store protection), the counters, and the RCache behaviour with the RTL's
  replacement policies (L1: 4-way tree pseudo-LRU, an invalid way first; L2: 64-entry FIFO;
  entries tagged (slot, encrypted id)),
  so that hits, misses and RBT fetch addresses are predicted exactly, whatever the memory
  latency (the RTL allocates at the miss), and each lone request's latency
  (:meth:`Result.latency`; a stream's answer cycles: :mod:`sw.gpushield.timing`).

Errors: a value that does not fit the field it stands for — a key, buffer id, pointer,
slot or any field of a :class:`WarpRequest` (base, lane pointers, mask, size_log2,
store, tag) — raises :class:`BcuInputError` (a ValueError), :class:`BcuInputTypeError`
(also a TypeError) when it is not an int at all (a float, a string, a request that is not
a WarpRequest), before the model changes state. Packing goes through
:mod:`sw.common.payload`, whose errors (PayloadError, a ValueError) it raises.
"""
import operator
from dataclasses import dataclass, field

from hw.gpushield.layout import (
    HALF_BITS,
    ID_BITS,
    KEY_BITS,
    MAX_SLOTS,
    RBT_ALIGN_BITS,
    RBT_ENTRY_BYTES,
    SLOT_BITS,
    VA_BITS,
    Cause,
    PtrType,
    cache_entry_layout,
    check_lanes,
    check_slots,
    log_layout,
    pointer_layout,
    rbt_entry_layout,
    req_layout,
    t3_meta_layout,
)
from sw.aes.model import SBOX
from sw.common.payload import field_slices, pack, unpack

__all__ = ["ROUNDS", "round_keys", "feistel_f", "encrypt_id", "decrypt_id", "pack_fields",
           "unpack_fields", "pointer", "t1_pointer", "t2_pointer", "t3_pointer", "pointer_kind",
           "pointer_addr", "pointer_eid", "with_addr", "pack_entry", "unpack_entry",
           "WarpRequest", "Uop", "Result", "SlotState", "BCUModel", "rbt_block_hit", "L1_ENTRIES",
           "L2_ENTRIES", "LATENCY", "BcuInputError", "BcuInputTypeError"]

ROUNDS = 4
HALF_MASK = (1 << HALF_BITS) - 1
ID_MASK = (1 << ID_BITS) - 1
VA_MASK = (1 << VA_BITS) - 1
L1_ENTRIES = 4
L2_ENTRIES = 64
# A lone micro-op's cycles in the RTL's non-blocking RCache engine (hw/gpushield/engine.py),
# by how it was resolved: a request of one micro-op presented to an idle unit is answered
# hw.gpushield.core.pipeline_depth(lanes) + these cycles later, a miss's plus the cycles
# from the mem_req transfer to the mem_resp transfer. A miss holds the engine itself for
# one cycle only (later lookups go on while it waits); sw/gpushield/timing.py computes a
# whole stream's answer cycles.
LATENCY = {"direct": 1, "L1": 1, "L2": 2, "mem": 4}


class BcuInputError(ValueError):
    """A key, id, pointer, slot or request field that does not fit its field."""


class BcuInputTypeError(BcuInputError, TypeError):
    """A key, id, pointer, slot or request field that is not an int (or a request that is
    not a :class:`WarpRequest`)."""


def _word(value, bits, what):
    """*value* as an unsigned int of *bits* bits (BcuInputError/BcuInputTypeError)."""
    if type(value) is not int:
        if isinstance(value, (float, str, bytes)):
            raise BcuInputTypeError(f"{what} must be an int, not {value!r}")
        try:
            value = operator.index(value)
        except TypeError:
            raise BcuInputTypeError(f"{what} must be an int, not {value!r}") from None
    if value < 0 or value >> bits:
        raise BcuInputError(f"{what} {value:#x} is not a {bits}-bit value")
    return value


# ---------------------------------------------------------------------------- cipher
def round_keys(key):
    """``k_r = (K >> 16 r) & 0xFFFF`` for r = 0..3 (BcuInputError: not a 64-bit key)."""
    key = _word(key, KEY_BITS, "key")
    return [(key >> (16 * r)) & 0xFFFF for r in range(ROUNDS)]


def feistel_f(x, k):
    """``F(x, k) = (SBOX[(x ^ k) & 0xFF] ^ (k >> 8)) & 0x7F``."""
    return (SBOX[(x ^ k) & 0xFF] ^ (k >> 8)) & HALF_MASK


def encrypt_id(buffer_id, key):
    """The 14-bit encryption of *buffer_id* under the 64-bit per-launch *key*."""
    buffer_id = _word(buffer_id, ID_BITS, "buffer id")
    left, right = buffer_id >> HALF_BITS, buffer_id & HALF_MASK
    for k in round_keys(key):
        left, right = right, left ^ feistel_f(right, k)
    return (left << HALF_BITS) | right


def decrypt_id(enc, key):
    """Inverse of :func:`encrypt_id`: the rounds backwards."""
    enc = _word(enc, ID_BITS, "encrypted id")
    left, right = enc >> HALF_BITS, enc & HALF_MASK
    for k in reversed(round_keys(key)):
        left, right = right ^ feistel_f(left, k), left
    return (left << HALF_BITS) | right


# ---------------------------------------------------------------------------- packing
def pack_fields(layout, **fields):
    """The integer of a struct *layout* with *fields* (enum members allowed; missing = 0),
    each range-checked: :func:`sw.common.payload.pack`."""
    return pack(layout, **fields)


def unpack_fields(layout, value):
    """``{name: int}`` of a *layout* integer (enum fields as ints too)."""
    return unpack(layout, value, enums=False)


def pointer(kind, addr, meta=0):
    return pack_fields(pointer_layout, addr=addr & VA_MASK, meta=meta, type=PtrType(kind))


def t1_pointer(addr):
    return pointer(PtrType.T1, addr)


def t2_pointer(addr, enc_id):
    return pointer(PtrType.T2, addr, enc_id)


def t3_pointer(addr, log2_size):
    return pointer(PtrType.T3, addr, pack_fields(t3_meta_layout, log2_size=log2_size))


_ADDR, _META, _TYPE = (field_slices(pointer_layout)[name] for name in ("addr", "meta", "type"))
_RESERVED, _LOG2 = (field_slices(t3_meta_layout)[name] for name in ("reserved", "log2_size"))
_KINDS = list(PtrType)


def _field(value, slice_):
    return (value >> slice_[0]) & ((1 << slice_[1]) - 1)


_POINTER_BITS = pointer_layout.size


def pointer_kind(p):
    """The type the BCU decodes: a Type 3 pointer with non-zero reserved bits 61..54 is
    INVALID. (These decoders take a 64-bit pointer: BcuInputError otherwise.)"""
    p = _word(p, _POINTER_BITS, "pointer")
    kind = _KINDS[_field(p, _TYPE)]
    if kind is PtrType.T3 and _field(_field(p, _META), _RESERVED):
        return PtrType.INVALID
    return kind


def pointer_addr(p):
    return _field(_word(p, _POINTER_BITS, "pointer"), _ADDR)


def pointer_eid(p):
    return _field(_word(p, _POINTER_BITS, "pointer"), _META)


def pointer_log2_size(p):
    return _field(_field(_word(p, _POINTER_BITS, "pointer"), _META), _LOG2)


def with_addr(p, addr):
    """*p* with its address bits replaced (pointer arithmetic keeps the tag)."""
    f = unpack_fields(pointer_layout, p)
    return pack_fields(pointer_layout, addr=addr & VA_MASK, meta=f["meta"], type=f["type"])


def pack_entry(base, size, valid=1, read_only=0, kernel_id=0):
    """A 128-bit RBT entry."""
    return pack_fields(rbt_entry_layout, base=base, size=size, valid=valid, read_only=read_only,
                       kernel_id=kernel_id)


def unpack_entry(word):
    return unpack_fields(rbt_entry_layout, word)


# ---------------------------------------------------------------------------- requests
_REQ_LAYOUTS = {}


def _req_layout(lanes):
    if lanes not in _REQ_LAYOUTS:
        _REQ_LAYOUTS[lanes] = req_layout(lanes)
    return _REQ_LAYOUTS[lanes]


@dataclass
class WarpRequest:
    base: int
    addrs: list            # one tagged pointer per lane (inactive lanes: anything, e.g. 0)
    mask: int
    size_log2: int = 2
    store: bool = False
    tag: int = 0

    def pack(self, lanes=None):
        lanes = len(self.addrs) if lanes is None else lanes
        if len(self.addrs) != lanes:
            raise ValueError(f"{len(self.addrs)} lane addresses for {lanes} lanes")
        return pack_fields(_req_layout(lanes), base=self.base, addr=list(self.addrs), mask=self.mask,
                           size_log2=self.size_log2, store=int(self.store), tag=self.tag)

    @property
    def lanes(self):
        return len(self.addrs)

    def active(self):
        return [k for k in range(len(self.addrs)) if self.mask >> k & 1]


@dataclass
class Uop:
    """One check the BCU issues for a request: a group of lanes with one lookup (``eid``
    set) or a result known without a lookup (``cause``)."""
    lanes: list
    eid: int = None
    cause: Cause = Cause.NONE
    lo: int = 0
    lane_lo: int = 0
    hi: int = 0
    lane_hi: int = 0
    level: str = "direct"       # "direct", "L1", "L2" or "mem"
    fetch: int = None           # RBT address fetched


@dataclass
class Result:
    tag: int
    ok: bool
    cause: Cause
    lane: int = 0               # the logged lane and address (meaningful when not ok)
    addr: int = 0
    uops: list = field(default_factory=list)

    @property
    def fetches(self):
        return [u.fetch for u in self.uops if u.fetch is not None]

    def latency(self, mem_cycles, front_registers=3):
        """Cycles from presenting the request to an idle unit to its answer, minus the
        pipeline depth (``front_registers`` + 3), when ``resp`` is ready and each fetch
        takes *mem_cycles* from mem_req to mem_resp: :data:`LATENCY` for one micro-op; a
        warp of several micro-ops by :func:`sw.gpushield.timing.answer_cycles` (misses
        overlap)."""
        from hw.gpushield.core import CHECKER_REGISTERS

        from .timing import lone_latency
        return lone_latency(self, mem_cycles, front_registers) - front_registers - CHECKER_REGISTERS


@dataclass
class _CacheEntry:
    base: int
    size: int
    valid: int
    read_only: int
    kernel_ok: int


def rbt_block_hit(addr, nbytes, rbt_base):
    """Whether the bytes ``[addr, addr + nbytes)`` touch the 256 KiB block of *rbt_base*
    (its bits 47..18: the block the RTL protects, which is the whole RBT when the base is
    aligned to :data:`~hw.gpushield.layout.RBT_BYTES`, as the driver allocates it). No
    wrap-around: an access past the top of the address space touches nothing below it."""
    block = rbt_base >> RBT_ALIGN_BITS
    return addr >> RBT_ALIGN_BITS == block or (addr + nbytes - 1) >> RBT_ALIGN_BITS == block


@dataclass
class SlotState:
    """One kernel slot: its configuration (inputs of the RTL), whether a kernel runs there
    (``launch`` sets it, ``retire`` clears it) and its violation log."""
    rbt_base: int = 0
    kernel_id: int = 0
    id_key: int = 0
    active: bool = False
    log_count: int = 0
    log_first: tuple = None     # (tag, cause, lane, addr)


def _slot0_property(name):
    return property(lambda self: getattr(self.slots[0], name),
                    lambda self, value: setattr(self.slots[0], name, value))


class BCUModel:
    """The BCU as a Python object. *read_rbt(addr)* returns the 128-bit word at a GPU
    address (the RBTs in GPU memory). Per kernel slot (``slots[s]``, :class:`SlotState`):
    set ``rbt_base``, ``kernel_id``, ``id_key``, then call :meth:`launch` (as the driver
    pulses ``launch`` of that slot) and :meth:`check` for each request in order, with the
    slot it names; :meth:`retire` when the kernel has finished. ``rbt_base``,
    ``kernel_id``, ``id_key``, ``log_count`` and ``log_first`` of the model itself are slot
    0's (the contract's single-kernel ports); ``precise`` is global."""

    def __init__(self, read_rbt, lanes=32, slots=MAX_SLOTS):
        self.lanes = check_lanes(lanes)
        self.nslots = check_slots(slots)
        self.read_rbt = read_rbt
        self.slots = [SlotState() for _ in range(slots)]
        self.precise = False
        self._log_layout = log_layout(lanes)
        self.reset()

    # slot 0's configuration and log under the contract's names
    rbt_base = _slot0_property("rbt_base")
    kernel_id = _slot0_property("kernel_id")
    id_key = _slot0_property("id_key")
    log_count = _slot0_property("log_count")
    log_first = _slot0_property("log_first")

    # -------------------------------------------------------------- state
    def reset(self):
        """Reset: counters, logs and caches cleared, every slot inactive (the configuration
        inputs keep their values)."""
        self.l1_hits = self.l2_hits = self.misses = 0
        self.exc_tags = []          # tags of failing responses in precise mode
        self.l1 = [None] * L1_ENTRIES       # (eid, _CacheEntry, slot) or None
        self.plru = [0, 0, 0]
        self.l2 = [None] * L2_ENTRIES
        self.l2_ptr = 0
        for st in self.slots:
            st.active, st.log_count, st.log_first = False, 0, None

    def launch(self, slot=0):
        """``launch`` of *slot*: its RCache entries invalidated (the other slots' stay, and
        the replacement state is not reset), its log cleared, the slot active."""
        st = self.slots[slot]
        self.l1 = [e if e is None or e[2] != slot else None for e in self.l1]
        self.l2 = [e if e is None or e[2] != slot else None for e in self.l2]
        st.active, st.log_count, st.log_first = True, 0, None

    def retire(self, slot=0):
        """``retire`` of *slot*: its kernel has finished; requests naming it fail (cause 3)."""
        self.slots[slot].active = False

    @staticmethod
    def storage_bits(slots=MAX_SLOTS):
        """RCache state bits as the RTL's ``BCU.storage_bits``: the tag is (slot, eid)."""
        way = (check_slots(slots) - 1).bit_length() + ID_BITS + 1 + cache_entry_layout.size
        return {"l1": L1_ENTRIES * way + (L1_ENTRIES - 1), "l2": L2_ENTRIES * way + 6}

    # -------------------------------------------------------------- caches
    def _touch(self, way):
        self.plru[0] = int(way < 2)
        if way < 2:
            self.plru[1] = int(way == 0)
        else:
            self.plru[2] = int(way == 2)

    def _victim(self):
        for w, e in enumerate(self.l1):
            if e is None:
                return w
        return 2 + self.plru[2] if self.plru[0] else self.plru[1]

    def _fill_l1(self, eid, entry, slot):
        way = self._victim()
        self.l1[way] = (eid, entry, slot)
        self._touch(way)

    def _lookup(self, eid, uop, slot):
        for way, e in enumerate(self.l1):
            if e is not None and e[0] == eid and e[2] == slot:
                self._touch(way)
                self.l1_hits += 1
                uop.level = "L1"
                return e[1]
        for e in self.l2:
            if e is not None and e[0] == eid and e[2] == slot:
                self.l2_hits += 1
                uop.level = "L2"
                self._fill_l1(eid, e[1], slot)
                return e[1]
        st = self.slots[slot]
        buffer_id = decrypt_id(eid, st.id_key)
        uop.fetch = (st.rbt_base + RBT_ENTRY_BYTES * buffer_id) & VA_MASK
        raw = unpack_entry(self.read_rbt(uop.fetch))
        entry = _CacheEntry(raw["base"], raw["size"], raw["valid"], raw["read_only"],
                            int(raw["kernel_id"] == st.kernel_id))
        self.misses += 1
        uop.level = "mem"
        self.l2[self.l2_ptr] = (eid, entry, slot)
        self.l2_ptr = (self.l2_ptr + 1) % L2_ENTRIES
        self._fill_l1(eid, entry, slot)
        return entry

    # -------------------------------------------------------------- the check
    def _check_request(self, req):
        """BcuInputError unless *req* is a WarpRequest of this BCU's lanes whose every field
        fits the ``req`` payload."""
        if not isinstance(req, WarpRequest):
            raise BcuInputTypeError(f"a request is a WarpRequest, not {type(req).__name__}")
        if not isinstance(req.addrs, (list, tuple)):
            raise BcuInputTypeError(f"WarpRequest.addrs is a list of pointers, not {req.addrs!r}")
        if req.lanes != self.lanes:
            raise BcuInputError(f"request of {req.lanes} lanes for a {self.lanes}-lane BCU")
        _word(req.base, _POINTER_BITS, "base pointer")
        for k, p in enumerate(req.addrs):
            _word(p, _POINTER_BITS, f"lane {k} pointer")
        for name, (_, width) in field_slices(_req_layout(self.lanes)).items():
            if name not in ("base", "addr"):
                _word(getattr(req, name), width, f"request {name}")

    def uops(self, req, slot=0):
        """The micro-ops of *req* on *slot* (front stage), without lookups. In priority
        order: a slot that does not exist or is not active (cause 3, every active lane);
        lanes of a bad type (cause 5); store lanes into an active slot's RBT (cause 6);
        then Type 1 / Type 3 / one Type 2 group per encrypted id."""
        self._check_request(req)
        slot = _word(slot, SLOT_BITS, "slot (req_slot)")
        va = [pointer_addr(p) for p in req.addrs]
        kinds = [pointer_kind(p) for p in req.addrs]
        active = req.active()
        base_kind = pointer_kind(req.base)

        def group(lanes, **kw):
            lo, lane_lo = min((va[k], k) for k in lanes)
            hi = max(va[k] for k in lanes)
            lane_hi = min(k for k in lanes if va[k] == hi)
            return Uop(lanes=list(lanes), lo=lo, lane_lo=lane_lo, hi=hi, lane_hi=lane_hi, **kw)

        if not active:
            return [Uop(lanes=[])]
        if slot >= self.nslots or not self.slots[slot].active:
            return [group(active, cause=Cause.KERNEL)]
        bad = [k for k in active if kinds[k] is PtrType.INVALID or kinds[k] is not base_kind]
        if bad:
            return [group(bad, cause=Cause.POINTER_TYPE)]
        if req.store:
            blocks = [st.rbt_base for st in self.slots if st.active]
            into_rbt = [k for k in active
                        if any(rbt_block_hit(va[k], 1 << req.size_log2, b) for b in blocks)]
            if into_rbt:
                return [group(into_rbt, cause=Cause.RBT_STORE)]
        if base_kind is not PtrType.T2 and base_kind is not PtrType.T3:
            return [Uop(lanes=active)]
        if base_kind is PtrType.T3:
            u = group(active)
            s, bva = pointer_log2_size(req.base), pointer_addr(req.base)
            last = u.hi + (1 << req.size_log2) - 1
            lo_ok = u.lo >> s == bva >> s
            if not (lo_ok and last >> s == bva >> s):
                u.cause = Cause.OUT_OF_BOUNDS
                if lo_ok:   # logged: the top lane
                    u.lo, u.lane_lo = u.hi, u.lane_hi
            return [u]
        out, pending = [], list(active)
        while pending:
            eid = pointer_eid(req.addrs[pending[0]])
            lanes = [k for k in pending if pointer_eid(req.addrs[k]) == eid]
            pending = [k for k in pending if k not in lanes]
            out.append(group(lanes, eid=eid))
        return out

    def check(self, req, slot=0):
        """The answer to *req* on kernel slot *slot*; updates caches, counters and the
        slot's log like the RTL (a slot that does not exist has no log to update)."""
        first = None    # (cause, lane, addr) of the first failing micro-op
        uops = self.uops(req, slot)
        for u in uops:
            lane, addr = u.lane_lo, u.lo
            if u.eid is not None:
                e = self._lookup(u.eid, u, slot)
                under = u.lo < e.base
                over = u.hi + (1 << req.size_log2) > e.base + e.size
                if not e.valid:
                    u.cause = Cause.INVALID_ENTRY
                elif not e.kernel_ok:
                    u.cause = Cause.KERNEL
                elif under or over:
                    u.cause = Cause.OUT_OF_BOUNDS
                    if not under:
                        lane, addr = u.lane_hi, u.hi
                elif req.store and e.read_only:
                    u.cause = Cause.READ_ONLY
            if u.cause is not Cause.NONE and first is None:
                first = (u.cause, lane, addr)
        if first is None:
            return Result(req.tag, True, Cause.NONE, uops=uops)
        cause, lane, addr = first
        if slot < self.nslots:
            st = self.slots[slot]
            if st.log_count == 0:
                st.log_first = (req.tag, cause, lane, addr)
            st.log_count = min(st.log_count + 1, (1 << 32) - 1)
        if self.precise:
            self.exc_tags.append(req.tag)
        return Result(req.tag, False, cause, lane, addr, uops=uops)

    def log_first_value(self, slot=0):
        """``log_first`` of *slot* as the RTL's output integer (0 when nothing is logged)."""
        first = self.slots[slot].log_first
        if first is None:
            return 0
        tag, cause, lane, addr = first
        return pack_fields(self._log_layout, tag=tag, cause=cause, lane=lane, addr=addr)
