"""``BCU``: the GPUShield Bounds-Checking Unit (docs/gpushield.md).

A pipeline of three parts, every path within 24 gate levels:

*Front* (:mod:`.front`; registers U, P1, P2 for 32 lanes): decodes the pointer types,
splits the warp into one micro-op per lane group (a bad type group; for Type 2 one group
per encrypted id; otherwise all active lanes), reduces each group's lane addresses to
``[min, max]`` with their lanes (pairwise, then 4-way merges), checks Type 3 and runs
decryption rounds 3..1 of the group's id. One micro-op per cycle.

*Engine* (:mod:`.engine`; register E, a fetch pipe F1, F2 and an answer queue): the RCache
lookup, non-blocking. A micro-op holds E for :data:`L1_CYCLES` = 1 cycle on an L1 hit (or
no lookup), :data:`L2_CYCLES` = 2 on an L2 hit, :data:`MISS_CYCLES` = 1 on a miss: the miss
allocates its L1 way and L2 entry (pending), issues its RBT fetch (``mem_req``
:data:`FETCH_DELAY` = 2 cycles later, at most :data:`MAX_FETCHES` = 4 outstanding) and waits
for the answer in the in-order answer queue (:data:`QUEUE_DEPTH` = 8) while later
micro-ops go on; a hit on a pending entry waits in E for its fill. The RCaches are tagged
with (slot, encrypted id), so the cipher is only needed for a fetch (round 0 in E's cycle,
the RBT address in F1's).

*Checker* (:mod:`.checker`; registers C1, C2, OUT): ``[min, max + bytes)`` against
``[entry.base, entry.base + entry.size)``, the cause, the first failing group of a split
warp; OUT drives ``resp``. The kernel slots' active bits, their violation logs, ``exc``
and the port wiring are here.

*Kernel slots*: ``slots`` kernels run at once, each with its own ``kernel_id``, RBT base
and id key; every request names its slot (``req_slot``). The contract's single-kernel
ports are slot 0; slot *s* > 0 has the same ports with the suffix ``_s``
(:meth:`BCU.slot_port`). A slot is active from its ``launch`` pulse to its ``retire``
pulse; a request on a slot that is not active (or does not exist) fails with cause 3.

Timing (docs/gpushield.md, "Micro-architecture and timing"; :mod:`sw.gpushield.timing`
computes it cycle by cycle): a request presented to an idle unit is answered
:func:`pipeline_depth` + 1 cycles later on an L1 hit (7 with 32 lanes), + 2 on an L2 hit,
+ 4 + the memory turnaround on a miss. Back to back, E takes one micro-op per cycle on L1
hits (one warp per cycle), one per 2 cycles on L2 hits, and a miss costs E one cycle: the
answers after it wait only for it (in-order answers), not for its memory turnaround one
after another. Answers leave in request order.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import increment, wire

from .checker import MUTANTS as CHECKER_MUTANTS
from .checker import Checker
from .engine import (
    FETCH_DELAY,
    L1_CYCLES,
    L1_ENTRIES,
    L2_CYCLES,
    L2_ENTRIES,
    MAX_FETCHES,
    MISS_CYCLES,
    QUEUE_DEPTH,
    Engine,
)
from .engine import MUTANTS as ENGINE_MUTANTS
from .front import Front, front_registers
from .layout import (
    COUNTER_BITS,
    ID_BITS,
    KERNEL_ID_BITS,
    KEY_BITS,
    MAX_SLOTS,
    SLOT_BITS,
    VA_BITS,
    Cause,
    cache_entry_layout,
    check_lanes,
    check_slots,
    log_layout,
    mem_req_layout,
    mem_resp_layout,
    req_layout,
    resp_layout,
)

__all__ = ["BCU", "L1_ENTRIES", "L2_ENTRIES", "L1_CYCLES", "L2_CYCLES", "MISS_CYCLES", "MAX_FETCHES",
           "QUEUE_DEPTH", "FETCH_DELAY",
           "CHECKER_REGISTERS", "SLOT_PORTS", "pipeline_depth"]

# the ports every kernel slot has: slot 0's are the contract's names, slot s > 0's carry
# the suffix _s (BCU.slot_port)
SLOT_PORTS = ("rbt_base", "kernel_id", "id_key", "launch", "retire", "log_first", "log_count")

CHECKER_REGISTERS = 3   # C1, C2, OUT


def pipeline_depth(lanes=32):
    """Cycles a request spends outside the engine: from being presented to an idle unit to
    its answer is ``pipeline_depth(lanes)`` + its engine cycles (6 + 1 for an L1 hit with
    32 lanes)."""
    return front_registers(lanes) + CHECKER_REGISTERS


class BCU(wiring.Component):
    """GPUShield Bounds-Checking Unit.

    Parameters
    ----------
    lanes : int
        Lanes per warp request (1..64; the contract's 32 by default).
    slots : int
        Kernel slots (1..4, default 4): kernels checked at once, each with its own
        configuration, RCache entries and violation log.

    Attributes
    ----------
    req : In(stream.Signature(req_layout(lanes)))
    req_slot : In(2)
        The kernel slot of the request on ``req`` (sampled with its payload).
    resp : Out(stream.Signature(resp_layout))
    mem_req : Out(stream.Signature(mem_req_layout))
    mem_resp : In(stream.Signature(mem_resp_layout))
    rbt_base, kernel_id, id_key, launch : In
        Slot 0's configuration; ``kernel_id``, ``id_key`` and ``rbt_base`` are set before
        the ``launch`` pulse and kept until the next one (requests of the slot in flight at
        its launch are answered, but do not fill the flushed RCaches). ``rbt_base`` should
        be aligned to 256 KiB: stores are refused in its aligned 256 KiB block.
    retire : In(1)
        Slot 0's kernel has finished (a pulse): the slot is no longer active.
    rbt_base_s, kernel_id_s, id_key_s, launch_s, retire_s : In
        The same for slot *s* = 1 .. slots - 1 (:meth:`slot_port`).
    precise : In(1)
        Precise mode, for every slot (one load/store unit).
    exc : Out(1)
        In precise mode, high in exactly the cycle a failing response is transferred
        (its tag is ``resp.payload.tag`` of that cycle), whatever its slot.
    log_first : Out(log_layout(lanes))
        Slot 0's first violation since reset or its last launch (valid while
        ``log_count`` > 0).
    log_count : Out(32)
        Slot 0's failing responses since reset or its last launch (saturating).
    log_first_s, log_count_s : Out
        The same for slot *s* > 0.
    l1_hits, l2_hits, misses : Out(32)
        Type 2 lookups answered by L1, by L2, from memory, since reset (wrapping; every slot).
    """

    def __init__(self, lanes=32, slots=MAX_SLOTS, *, _formal_mutant=None):
        self.lanes = check_lanes(lanes)
        self.slots = check_slots(slots)
        # test-only (formal/gpushield.py): "log_wraps" here, the Checker's and the Engine's
        # otherwise (passed on to them)
        if _formal_mutant not in (*CHECKER_MUTANTS, *ENGINE_MUTANTS, "log_wraps"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        # cycles `req.ready` stays low after reset (from the first cycle with rst low) while
        # the engine zeroes the L2 RCache entries, one per cycle
        self.scrub_cycles = L2_ENTRIES
        super().__init__({
            "req": In(stream.Signature(req_layout(lanes))),
            "resp": Out(stream.Signature(resp_layout)),
            "mem_req": Out(stream.Signature(mem_req_layout)),
            "mem_resp": In(stream.Signature(mem_resp_layout)),
            "rbt_base": In(VA_BITS),
            "kernel_id": In(KERNEL_ID_BITS),
            "id_key": In(KEY_BITS),
            "precise": In(1),
            "launch": In(1),
            "exc": Out(1),
            "log_first": Out(log_layout(lanes)),
            "log_count": Out(COUNTER_BITS),
            "l1_hits": Out(COUNTER_BITS),
            "l2_hits": Out(COUNTER_BITS),
            "misses": Out(COUNTER_BITS),
            # beyond the contract: the slots
            "req_slot": In(SLOT_BITS),
            "retire": In(1),
            **{f"{name}_{s}": port for s in range(1, slots) for name, port in (
                ("rbt_base", In(VA_BITS)), ("kernel_id", In(KERNEL_ID_BITS)), ("id_key", In(KEY_BITS)),
                ("launch", In(1)), ("retire", In(1)), ("log_first", Out(log_layout(lanes))),
                ("log_count", Out(COUNTER_BITS)))},
        })

    def slot_port(self, name, slot):
        """The port *name* (one of :data:`SLOT_PORTS`) of kernel slot *slot*: ``name`` for
        slot 0, ``name_s`` for slot *s* > 0."""
        if name not in SLOT_PORTS:
            raise ValueError(f"{name!r} is not a per-slot port ({', '.join(SLOT_PORTS)})")
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < self.slots:
            raise ValueError(f"slot must be an int in 0..{self.slots - 1}, not {slot!r}")
        return getattr(self, name if slot == 0 else f"{name}_{slot}")

    @staticmethod
    def storage_bits(slots=MAX_SLOTS):
        """``{"l1": bits, "l2": bits}`` of RCache state of a unit with *slots* kernel slots
        (tag = slot bits + encrypted id, valid and entry per way, plus the replacement
        state)."""
        way = (check_slots(slots) - 1).bit_length() + ID_BITS + 1 + cache_entry_layout.size
        return {"l1": L1_ENTRIES * way + (L1_ENTRIES - 1), "l2": L2_ENTRIES * way + 6}

    def elaborate(self, platform):
        m = Module()
        slots = range(self.slots)
        port = self.slot_port
        # the checker's and the engine's mutants are theirs; "log_wraps" is this module's (below)
        checker_mutant = self._formal_mutant if self._formal_mutant in CHECKER_MUTANTS else None
        engine_mutant = self._formal_mutant if self._formal_mutant in ENGINE_MUTANTS else None
        m.submodules.front = front = Front(self.lanes, self.slots)
        m.submodules.engine = engine = Engine(self.lanes, self.slots, _formal_mutant=engine_mutant)
        m.submodules.checker = checker = Checker(self.lanes, _formal_mutant=checker_mutant)
        # no request while the engine zeroes its L2 entries after reset (scrub_cycles)
        m.d.comb += [front.req.valid.eq(self.req.valid & ~engine.scrubbing),
                     front.req.payload.eq(self.req.payload),
                     front.req_slot.eq(self.req_slot),
                     self.req.ready.eq(front.req.ready & ~engine.scrubbing)]
        wiring.connect(m, front.o, engine.i)
        wiring.connect(m, engine.o, checker.i)
        wiring.connect(m, engine.mem_req, wiring.flipped(self.mem_req))
        wiring.connect(m, wiring.flipped(self.mem_resp), engine.mem_resp)
        launch = wire(m, Cat(port("launch", s) for s in slots), "launch_vec")
        retire = wire(m, Cat(port("retire", s) for s in slots), "retire_vec")
        # A slot is active from its launch to its retire (a launch in the same cycle as a
        # retire wins: the new kernel runs). Registered: a request accepted in the launch
        # cycle still belongs to the slot's previous state, as it is stale for the caches.
        active = Signal(self.slots, name="slot_active")
        m.d.sync += active.eq((active & ~retire) | launch)
        m.d.comb += [front.active.eq(active), front.launch.eq(launch)]
        for s in slots:
            m.d.comb += [front.id_key[s].eq(port("id_key", s)), front.rbt_base[s].eq(port("rbt_base", s))]
        m.d.comb += [
            engine.launch.eq(launch),
            self.l1_hits.eq(engine.l1_hits),
            self.l2_hits.eq(engine.l2_hits),
            self.misses.eq(engine.misses),
        ]
        for s in slots:
            m.d.comb += [engine.id_key[s].eq(port("id_key", s)),
                         engine.rbt_base[s].eq(port("rbt_base", s)),
                         engine.kernel_id[s].eq(port("kernel_id", s))]

        answer = checker.o.payload
        m.d.comb += [
            self.resp.valid.eq(checker.o.valid),
            checker.o.ready.eq(self.resp.ready),
            self.resp.payload.tag.eq(answer.log.tag),
            self.resp.payload.ok.eq(answer.log.cause == Cause.NONE),
            self.resp.payload.cause.eq(answer.log.cause),
        ]
        failed = wire(m, self.resp.valid & self.resp.ready & (answer.log.cause != Cause.NONE), "failed")
        m.d.comb += self.exc.eq(self.precise & failed)

        # One violation log per slot: a failing answer goes to its request's slot's log (a
        # slot that does not exist has none); the slot's launch clears it (it belongs to a
        # kernel).
        for s in slots:
            log_first = Signal(log_layout(self.lanes), name=f"log_first{s}")
            log_count = Signal(COUNTER_BITS, name=f"log_count{s}")
            with m.If(failed & (answer.slot == s)):
                with m.If(log_count == 0):
                    m.d.sync += log_first.eq(answer.log)
                with m.If(1 if self._formal_mutant == "log_wraps" else ~log_count.all()):
                    m.d.sync += log_count.eq(increment(m, log_count, f"log_inc{s}"))
            with m.If(launch[s]):
                m.d.sync += [log_count.eq(0), log_first.eq(0)]
            m.d.comb += [port("log_first", s).eq(log_first), port("log_count", s).eq(log_count)]
        return m
