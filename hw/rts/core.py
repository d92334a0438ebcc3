"""``MeasurementStore`` (design ``rts``): the H100-style hardware root of trust for storage.

*slots* measurement slots of 384 bits, each changed only by **extend**: a request
``{slot, owner, value}`` makes the slot ``SHA-384(old ‖ value)``, computed by the
:class:`hw.sha.SHA384` engine inside the store on a block the store pads itself (old ‖ value
is 96 bytes, one 128-byte block with a fixed tail), so no port can write a chosen value.

- **Owner lock.** A slot's first extend binds it to the requesting owner id (no separate
  claim operation). An extend by any other owner is refused: the slot is unchanged, the
  response says ``REFUSED_OWNER`` and ``refused`` (saturating) counts it.
- **Responses.** One ``resp`` transfer per extend, in order: ``OK`` after the new value is
  stored, or ``REFUSED_OWNER``. The store takes the next extend once the response has gone.
- **Read port** (the RTR's): ``rd`` {slot} → ``rd_resp`` {value, owner, bound, count}, the
  slot as stored in the cycle the request was taken (an extend's write in that same cycle
  is not seen: reads are not transparent).
- **Reset.** Only the cold reset ``rst`` clears the store: every register in the reset cycle,
  then a walk writes zero to one slot per cycle (``scrub_cycles`` = *slots* cycles) with
  ``ready`` low and both request ports closed. There is no FLR input: measurements and
  owner bindings survive a function-level reset (docs/rts.md says why).

Timing: an extend is taken in cycle 0, the slot read arrives in cycle 1, the padded block
goes to the engine in cycle 2, its digest is written in cycle 2 + ``sha.latency`` and the
response is valid the cycle after (``extend_latency`` = 85 cycles); a refused extend
answers in cycle 2 (``refuse_latency``). A read answers in the next cycle.

The slots are a ``lib.memory.Memory`` (one write port, one read port for extends, one for
the RTR). Between the memory and the engine the owner check is registered (the state
register), so no path runs from the memory through the comparison into the engine.
"""
from amaranth.hdl import Cat, Const, Module, Mux, ResetSignal, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.common import increment
from hw.sha import SHA384

from .layout import (
    COUNT_BITS,
    OWNER_BITS,
    VALUE_BITS,
    VALUE_BYTES,
    Status,
    extend_layout,
    extend_resp_layout,
    read_layout,
    slot_layout,
)

__all__ = ["MeasurementStore", "PAD_TAIL", "MUTANTS"]

# Bytes 96..127 of the block SHA-384(old ‖ value) hashes: FIPS 180-4 § 5.1.2 padding of a
# 96-byte message (0x80, zeros, the length 768 bits as a 128-bit big-endian integer), as the
# bus-order field value of those 32 bytes.
PAD_TAIL = int.from_bytes(b"\x80" + bytes(15) + (2 * VALUE_BYTES * 8).to_bytes(16, "big"), "little")
SAT = (1 << 32) - 1

# test-only seeded bugs for formal/rts.py (never set in a design): "value_direct" stores the
# requested value instead of the digest; "wrong_slot" writes the digest to the neighbouring
# slot; "hash_without_old" hashes zero ‖ value (the old value not chained in);
# "owner_unchecked" never refuses; "bind_forgotten" does not set `bound` on the first extend
MUTANTS = ("value_direct", "wrong_slot", "hash_without_old", "owner_unchecked", "bind_forgotten")

# extend engine states
IDLE, CHECK, OFFER, HASH, RESP = range(5)


class MeasurementStore(wiring.Component):
    """Extend-only SHA-384 measurement slots with per-slot owner locks (module docstring).

    Parameters
    ----------
    slots : int
        Number of measurement slots, a power of two in 2..1024 (64, as the H100's RTS).
    owner_bits : int
        Width of an RTM owner id, 1..16.

    Attributes
    ----------
    extend : In(stream.Signature({slot, owner, value: 384}))
    resp : Out(stream.Signature({slot, status: Status}))
    rd : In(stream.Signature({slot}))
    rd_resp : Out(stream.Signature({value: 384, owner, bound: 1, count: 32}))
    ready : Out(1)
        Low while the reset scrub runs (``scrub_cycles`` cycles after ``rst``).
    refused : Out(32)
        Extends refused for the owner lock since the reset, saturating at 2^32 - 1.
    """

    def __init__(self, slots=64, owner_bits=OWNER_BITS, *, _formal_mutant=None):
        if isinstance(slots, bool) or not isinstance(slots, int):
            raise TypeError(f"slots must be an int, not {slots!r}")
        if not 2 <= slots <= 1024 or slots & (slots - 1):
            raise ValueError(f"slots must be a power of two in 2..1024, not {slots}")
        if isinstance(owner_bits, bool) or not isinstance(owner_bits, int):
            raise TypeError(f"owner_bits must be an int, not {owner_bits!r}")
        if not 1 <= owner_bits <= 16:
            raise ValueError(f"owner_bits must be in 1..16, not {owner_bits}")
        if _formal_mutant not in (None, *MUTANTS):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self.slots, self.owner_bits = slots, owner_bits
        self.slot_bits = (slots - 1).bit_length()
        self._formal_mutant = _formal_mutant
        self._sha = SHA384()
        self.scrub_cycles = slots
        self.extend_latency = 3 + self._sha.latency     # extend taken -> resp.valid
        self.refuse_latency = 2
        self.read_latency = 1
        super().__init__({
            "extend": In(stream.Signature(extend_layout(self.slot_bits, owner_bits))),
            "resp": Out(stream.Signature(extend_resp_layout(self.slot_bits))),
            "rd": In(stream.Signature(read_layout(self.slot_bits))),
            "rd_resp": Out(stream.Signature(slot_layout(owner_bits))),
            "ready": Out(1),
            "refused": Out(32),
        })
        # named here so that the formal harness can watch the slot memory's write port
        self.wr_en = Signal(name="slot_wr_en")
        self.wr_addr = Signal(self.slot_bits, name="slot_wr_addr")
        self.wr_data = Signal(slot_layout(owner_bits), name="slot_wr_data")

    def elaborate(self, platform):
        m = Module()
        mutant = self._formal_mutant
        m.submodules.sha = sha = self._sha
        m.submodules.slots = mem = Memory(shape=slot_layout(self.owner_bits), depth=self.slots, init=[])
        wp = mem.write_port()
        xp = mem.read_port()        # the extend engine's
        rp = mem.read_port()        # the RTR's

        # ---- reset scrub: one slot per cycle after rst; both request ports closed meanwhile
        scrubbing = Signal(init=1, name="scrubbing")
        scrub_addr = Signal(self.slot_bits, name="scrub_addr")
        with m.If(scrubbing):
            m.d.sync += scrub_addr.eq(scrub_addr + 1)
            with m.If(scrub_addr == self.slots - 1):
                m.d.sync += scrubbing.eq(0)
        m.d.comb += self.ready.eq(~scrubbing)

        # ---- extend engine
        state = Signal(range(RESP + 1), name="state")
        req = Signal(extend_layout(self.slot_bits, self.owner_bits), name="req")
        status = Signal(Status, name="status")
        old = xp.data                               # the slot as read in CHECK (held after)
        take = Signal(name="extend_take")
        m.d.comb += [
            self.extend.ready.eq(~scrubbing & (state == IDLE)),
            take.eq(self.extend.valid & self.extend.ready),
        ]
        foreign = Signal(name="foreign_owner")
        m.d.comb += foreign.eq(old.bound & (old.owner != req.owner))
        if mutant == "owner_unchecked":
            m.d.comb += foreign.eq(0)

        offer = Signal(name="offer")        # state == OFFER, as a flip-flop of its own
        old_value = Const(0, VALUE_BITS) if mutant == "hash_without_old" else old.value
        m.d.comb += [
            sha.i.payload.block.eq(Cat(old_value, req.value, Const(PAD_TAIL, 1024 - 2 * VALUE_BITS))),
            # `first` and `last` are 1 whenever `valid` is (a one-block message). All three come
            # straight from the `offer` flip-flop, as if they were the engine's own inputs:
            # with constant `first`/`last` ABC mapped the engine's v_e input two gate levels
            # deeper than in sha384 alone (26), with `valid` decoded from the state one (25).
            sha.i.payload.first.eq(offer),
            sha.i.payload.last.eq(offer),
            sha.i.valid.eq(offer),
            sha.o.ready.eq(state == HASH),
        ]
        # while scrubbing the extend port re-reads slot 0 (zeroed in the walk's first cycle),
        # so its data register lets go of the last slot read before the reset
        m.d.comb += [xp.addr.eq(Mux(scrubbing, 0, self.extend.payload.slot)), xp.en.eq(scrubbing | take)]

        done = Signal(name="digest_in")
        m.d.comb += done.eq((state == HASH) & sha.o.valid & ~ResetSignal())
        with m.Switch(state):
            with m.Case(IDLE):
                with m.If(take):
                    m.d.sync += [req.eq(self.extend.payload), state.eq(CHECK)]
            with m.Case(CHECK):
                with m.If(foreign):
                    m.d.sync += [status.eq(Status.REFUSED_OWNER), state.eq(RESP)]
                with m.Else():
                    m.d.sync += [state.eq(OFFER), offer.eq(1)]
            with m.Case(OFFER):
                with m.If(sha.i.ready):
                    m.d.sync += [state.eq(HASH), offer.eq(0)]
            with m.Case(HASH):
                with m.If(sha.o.valid):
                    m.d.sync += [status.eq(Status.OK), state.eq(RESP)]
            with m.Case(RESP):
                with m.If(self.resp.ready):
                    m.d.sync += state.eq(IDLE)
        m.d.comb += [
            self.resp.valid.eq(state == RESP),
            self.resp.payload.slot.eq(req.slot),
            self.resp.payload.status.eq(status),
        ]

        # refusals: a log-depth increment, saturating (a plain `+ 1` is a ripple chain in ABC)
        refused_inc = increment(m, self.refused, "refused_inc")
        with m.If((state == CHECK) & foreign & (self.refused != SAT)):
            m.d.sync += self.refused.eq(refused_inc)

        # ---- the slot memory's one write port: the scrub's zeros, or an extend's digest
        count_inc = increment(m, old.count, "count_inc")
        new = Signal(slot_layout(self.owner_bits), name="new_slot")
        m.d.comb += [
            new.value.eq(req.value if mutant == "value_direct" else sha.o.payload.digest),
            new.owner.eq(req.owner),
            new.bound.eq(old.bound if mutant == "bind_forgotten" else 1),
            new.count.eq(Mux(old.count == (1 << COUNT_BITS) - 1, old.count, count_inc)),
        ]
        target = req.slot ^ 1 if mutant == "wrong_slot" else req.slot
        m.d.comb += [
            self.wr_en.eq(scrubbing | done),
            self.wr_addr.eq(Mux(scrubbing, scrub_addr, target)),
            self.wr_data.eq(Mux(scrubbing, 0, new.as_value())),
            wp.en.eq(self.wr_en), wp.addr.eq(self.wr_addr), wp.data.eq(self.wr_data),
        ]

        # ---- the RTR's read port
        rd_take = Signal(name="rd_take")
        m.d.comb += [
            self.rd.ready.eq(~scrubbing & (~self.rd_resp.valid | self.rd_resp.ready)),
            rd_take.eq(self.rd.valid & self.rd.ready),
            rp.addr.eq(Mux(scrubbing, 0, self.rd.payload.slot)),
            rp.en.eq(scrubbing | rd_take),
            self.rd_resp.payload.eq(rp.data),
        ]
        with m.If(rd_take):
            m.d.sync += self.rd_resp.valid.eq(1)
        with m.Elif(self.rd_resp.ready):
            m.d.sync += self.rd_resp.valid.eq(0)
        return m
