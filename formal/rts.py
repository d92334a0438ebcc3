"""``rts`` (hw/rts): the measurement store's extend-only slots and owner locks.

Both properties run on ``MeasurementStore(slots=4, owner_bits=2)`` (small, so that the
slot memory, mapped to flip-flops by the runner's ``memory_map``, stays small; the store's
logic does not depend on the number of slots beyond the address width) with its SHA-384
engine replaced by :class:`AbstractSha`: SHA-384 is **abstracted** — the engine takes a
block when the solver lets it, answers when the solver lets it, and its digest is a free
value in every cycle; the harness records the block it took. So the properties hold for
any hash function and any engine latency: they are about the store, not about SHA-384
(``tb/rts`` and ``tb/sha`` check the hash itself against hashlib). Every input of the store
is free (extend and read requests, back-pressure), and the reset is free after the first
cycle.

The harness watches one slot ``s`` chosen by the solver (``AnyConst``, so every slot is
covered) through the memory's only write port (the store instantiates one; its enable,
address and data are named nets of the component). A shadow register follows every write
to ``s``, so in the cycle of a write it holds the slot's previous value.

- ``rts/extend_only``: a write to ``s`` in a reset cycle writes zero; in the ``slots``
  cycles after a reset it writes zero or is an extend; any other write is an extend: in
  that cycle the engine hands over a digest, the slot's new value is that digest, the
  block the engine took for it was the padded ``previous value of s ‖ the requested
  value`` (the padding written out here from FIPS 180-4, not taken from the RTL) as a
  one-block message (``first`` and ``last``), and the extend request the store took last
  named slot ``s``. So a slot never takes a value that is not the engine's answer for an
  extend of its own previous value: there is no direct write path.
- ``rts/owner_lock``: every extend's write binds the slot (``bound`` 1) to the requesting
  owner; a write to ``s`` when ``s`` is bound comes from an extend by the owner it is
  bound to, and keeps that owner. So a slot bound to owner A never changes on an extend by
  owner B.

Both are **bounded** (see ``DEPTH_REASON``): the memory is a register file the harness
can only shadow through its write port, so from an arbitrary state the shadow and the
memory are unrelated and induction cannot close (as ``cc_ctrl/flr_scrub_words``).
"""
import functools

from amaranth.asserts import AnySeq
from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring

from hw.rts import MeasurementStore
from hw.rts.layout import slot_layout

from . import Harness, Property, discard, free_inputs, freeze, with_mutants

__all__ = ["PROPERTIES", "AbstractSha", "SPEC_PAD_TAIL"]

SLOTS, OWNER_BITS = 4, 2
RTS_P = {"slots": SLOTS, "owner_bits": OWNER_BITS}
# Data independence: the store moves measurement bytes (request value, digest, slot value)
# and never looks at them, so the bytes that can be nonzero in a request and a digest are
# the first and the last of the 48; the others are zero (assumed of the requests, so in the
# abstract engine's digests). A misrouted field or a swapped half shows in those two bytes;
# full-width values would make every step of the BMC much slower.
FREE_BYTES = (0, 47)
# FIPS 180-4 § 5.1.2 padding of a 96-byte message, bytes 96..127 of its one block (bus
# order: byte k in bits 8k+7..8k): 0x80, 15 zero bytes, the length 768 bits as a 128-bit
# big-endian integer. Written out from the standard, not imported from hw/rts.
SPEC_PAD_TAIL = int.from_bytes(bytes([0x80]) + bytes(15) + bytes(14) + bytes([0x03, 0x00]), "little")


class AbstractSha(wiring.Component):
    """The SHA-384 engine abstracted: one block in flight. It takes a block on ``i`` when
    empty and the solver lets it (``i.ready`` free), offers a digest on ``o`` while full
    when the solver lets it (``o.valid`` free), and the digest is free in every cycle. It
    records the block it holds (``in_block``, ``in_first``, ``in_last``) for the harness.
    The store sends one block per extend and waits for its digest before the next, so one
    block in flight is all the real engine's behaviour it can see."""

    def __init__(self, signature, free_bytes=None):
        super().__init__(signature)
        self._free_bytes = free_bytes
        self.full = Signal(name="eng_full")
        self.in_block = Signal(len(self.i.payload.block), name="eng_in_block")
        self.in_first = Signal(name="eng_in_first")
        self.in_last = Signal(name="eng_in_last")

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.i.ready.eq(~self.full & AnySeq(1)),
            self.o.valid.eq(self.full & AnySeq(1)),
        ]
        digest = self.o.payload.digest
        if self._free_bytes is None:
            m.d.comb += digest.eq(AnySeq(len(digest)))
        else:           # the free bytes only, the others zero (see formal/rts.py, "data independence")
            for k in range(len(digest) // 8):
                m.d.comb += digest[8 * k:8 * k + 8].eq(AnySeq(8) if k in self._free_bytes else 0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.full.eq(1), self.in_block.eq(self.i.payload.block),
                         self.in_first.eq(self.i.payload.first), self.in_last.eq(self.i.payload.last)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += self.full.eq(0)
        return m


def _store(mutant, free_bytes=FREE_BYTES):
    """``(harness, dut, engine, watch)``: the store with the abstract engine, every input
    free; ``watch``: the watched slot, its shadow and the last extend request taken."""
    h = Harness()
    dut = MeasurementStore(**RTS_P, _formal_mutant=mutant)
    discard(dut._sha)
    dut._sha = eng = AbstractSha(dut._sha.signature, free_bytes)
    frozen, _fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    m = h.m
    value = dut.extend.payload.value
    for k in range(len(value) // 8):
        if k not in free_bytes:
            h.assume(value[8 * k:8 * k + 8] == 0)
    s = h.any_const(dut.slot_bits, "watched_slot")
    write_s = Signal(name="write_watched")
    m.d.comb += write_s.eq(dut.wr_en & (dut.wr_addr == s))
    # the watched slot's contents as the write port left them (its previous value in the
    # cycle of a write); `known` once a write has set it since the first cycle
    shadow = Signal(slot_layout(OWNER_BITS), name="shadow", reset_less=True)
    known = Signal(name="shadow_known", reset_less=True)
    with m.If(write_s):
        m.d.sync += shadow.eq(dut.wr_data)
    m.d.sync += known.eq(write_s | (known & ~h.first))
    # the last extend request the store took (a harness register: not reset)
    req = Signal(dut.extend.payload.shape(), name="last_request", reset_less=True)
    have_req = Signal(name="have_request", reset_less=True)
    take = dut.extend.valid & dut.extend.ready
    with m.If(take):
        m.d.sync += req.eq(dut.extend.payload)
    m.d.sync += have_req.eq(take | (have_req & ~h.first))
    since = h.since(SLOTS + 1)
    # a write that the scrub may make: zero, in a reset cycle or the `slots` cycles after
    zero = dut.wr_data.as_value() == 0
    scrub_write = zero & (h.rst | (since < SLOTS))
    h.check("reset_writes_zero", zero, guard=write_s & h.rst)
    extend_write = Signal(name="extend_write")
    m.d.comb += extend_write.eq(write_s & ~scrub_write)
    return h, dut, eng, (s, shadow, known, req, have_req, extend_write)


def extend_only(mutant=None, free_bytes=FREE_BYTES):
    h, dut, eng, (s, shadow, known, req, have_req, extend_write) = _store(mutant, free_bytes)
    h.check("digest_handed_over", eng.o.valid & eng.o.ready, guard=extend_write)
    h.check("value_is_digest", dut.wr_data.value == eng.o.payload.digest, guard=extend_write)
    h.check("one_block_message", eng.in_first & eng.in_last, guard=extend_write)
    h.check("requested_slot", have_req & (req.slot == s), guard=extend_write)
    expect = Cat(shadow.value, req.value)
    h.check("block_is_old_and_value", (eng.in_block[:768] == expect) & (eng.in_block[768:] == SPEC_PAD_TAIL),
            guard=extend_write & known)
    h.notes.append(f"MeasurementStore({RTS_P}); SHA-384 engine abstracted (AbstractSha); "
                   f"free bytes of values and digests: {'all' if len(free_bytes) == 48 else free_bytes}; "
                   f"padding tail {SPEC_PAD_TAIL:#066x}")
    return h


def owner_lock(mutant=None):
    h, dut, eng, (s, shadow, known, req, have_req, extend_write) = _store(mutant)
    h.check("extend_binds", dut.wr_data.bound & have_req & (dut.wr_data.owner == req.owner),
            guard=extend_write)
    locked = extend_write & known & shadow.bound
    h.check("bound_owner_extends", req.owner == shadow.owner, guard=locked)
    h.check("owner_kept", dut.wr_data.owner == shadow.owner, guard=locked)
    h.notes.append(f"MeasurementStore({RTS_P}); SHA-384 engine abstracted (AbstractSha)")
    return h


DEPTH = 16
DEPTH_REASON = (f"the reset cycle is step 0 and the {SLOTS}-cycle scrub steps 1-{SLOTS}; an extend taken at step "
                f"{SLOTS + 1} writes its slot at step {SLOTS + 4} (slot read, block to the engine, digest written: "
                "the abstract engine's shortest latency), its response leaves the next step, and a second extend of "
                f"the same slot writes at step {SLOTS + 9}. Every check compares one write of the watched slot with "
                "the slot's previous value, so a binding extend followed by one more extend (by its owner or "
                "another, of the same or another value) reaches every case the checks distinguish; the mutants fail "
                f"at steps {SLOTS + 4} and {SLOTS + 9}")

PROPERTIES = [
    *with_mutants(Property("rts", "extend_only", extend_only, depth=DEPTH, params=RTS_P,
                           depth_reason=DEPTH_REASON,
                           doc="a slot only takes the engine's digest of its previous value and the requested "
                               "value, for an extend of that slot; the scrub writes only zero"),
                  ("value_direct", "the requested value is stored instead of the digest"),
                  ("wrong_slot", "the digest is written to the neighbouring slot (slot ^ 1)"),
                  ("hash_without_old", "the block hashes zero ‖ value: the old value is not chained in")),
    # the same claim with every byte of values and digests free (no data-independence
    # reduction): about 25 times slower (about 6 minutes), so not in the fast subset
    *with_mutants(Property("rts", "extend_full_width", functools.partial(extend_only, free_bytes=tuple(range(48))),
                           depth=DEPTH, params=RTS_P, depth_reason=DEPTH_REASON, fast=False,
                           doc="extend_only with all 48 bytes of requested values and digests free"),
                  ("value_direct", "the requested value is stored instead of the digest"),
                  ("wrong_slot", "the digest is written to the neighbouring slot (slot ^ 1)")),
    *with_mutants(Property("rts", "owner_lock", owner_lock, depth=DEPTH, params=RTS_P,
                           depth_reason=DEPTH_REASON,
                           doc="an extend binds its slot to its owner; a bound slot changes only on an extend "
                               "by its owner"),
                  ("owner_unchecked", "the owner check is skipped: any owner extends a bound slot"),
                  ("bind_forgotten", "the first extend does not set `bound`: the slot stays open to all")),
]
