"""``BCU``: the GPUShield Bounds-Checking Unit (docs/gpushield.md).

A pipeline of three parts, every path within 24 gate levels:

*Front* (:mod:`.front`; registers U, P1, P2 for 32 lanes): decodes the pointer types,
splits the warp into one micro-op per lane group (a bad type group; for Type 2 one group
per encrypted id; otherwise all active lanes), reduces each group's lane addresses to
``[min, max]`` with their lanes (pairwise, then 4-way merges), checks Type 3 and runs
decryption rounds 3..1 of the group's id. One micro-op per cycle.

*Engine* (:mod:`.engine`; register E): the only stage that can hold a micro-op for more
than a cycle. L1 RCache hit (or no lookup): one cycle; L2 hit: 3; miss: 4 + memory. The
RCaches are tagged with the encrypted id, so the cipher is only needed for a fetch and is
finished (round 0, then the RBT address) while the L1 and L2 tags are compared.

*Checker* (:mod:`.checker`; registers C1, C2, OUT): ``[min, max + bytes)`` against
``[entry.base, entry.base + entry.size)``, the cause, the first failing group of a split
warp; OUT drives ``resp``. The violation log, ``exc`` and the port wiring are here.

Timing: a request answers :func:`pipeline_depth` cycles plus its engine cycles (the sum of
:data:`L1_INTERVAL` / :data:`L2_INTERVAL` / :data:`MISS_INTERVAL` + memory over its
micro-ops) after it is presented to an idle unit — 7 cycles for an L1 hit with 32 lanes —
and back to back, each answer follows the previous one by its engine cycles: one warp
per cycle on L1 hits. Answers leave in request order.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import increment, wire

from .checker import Checker
from .engine import L1_ENTRIES, L1_INTERVAL, L2_ENTRIES, L2_INTERVAL, MISS_INTERVAL, Engine
from .front import Front, front_registers
from .layout import (
    COUNTER_BITS,
    ID_BITS,
    KERNEL_ID_BITS,
    KEY_BITS,
    VA_BITS,
    Cause,
    cache_entry_layout,
    check_lanes,
    log_layout,
    mem_req_layout,
    mem_resp_layout,
    req_layout,
    resp_layout,
)

__all__ = ["BCU", "L1_ENTRIES", "L2_ENTRIES", "L1_INTERVAL", "L2_INTERVAL", "MISS_INTERVAL",
           "CHECKER_REGISTERS", "pipeline_depth"]

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

    Attributes
    ----------
    req : In(stream.Signature(req_layout(lanes)))
    resp : Out(stream.Signature(resp_layout))
    mem_req : Out(stream.Signature(mem_req_layout))
    mem_resp : In(stream.Signature(mem_resp_layout))
    rbt_base, kernel_id, id_key, precise, launch : In
        Configuration; ``kernel_id``, ``id_key`` and ``rbt_base`` are set before the
        ``launch`` pulse and kept until the next one (requests in flight at a launch are
        answered, but do not fill the flushed RCaches).
    exc : Out(1)
        In precise mode, high in exactly the cycle a failing response is transferred
        (its tag is ``resp.payload.tag`` of that cycle).
    log_first : Out(log_layout(lanes))
        The first violation since reset or the last launch (valid while ``log_count`` > 0).
    log_count : Out(32)
        Failing responses since reset or the last launch (saturating).
    l1_hits, l2_hits, misses : Out(32)
        Type 2 lookups answered by L1, by L2, from memory, since reset (wrapping).
    """

    def __init__(self, lanes=32, *, _formal_mutant=None):
        self.lanes = check_lanes(lanes)
        self._formal_mutant = _formal_mutant    # test-only: the Checker's (formal/gpushield.py)
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
        })

    @staticmethod
    def storage_bits():
        """``{"l1": bits, "l2": bits}`` of RCache state (tag + valid + entry per way, plus
        the replacement state)."""
        way = ID_BITS + 1 + cache_entry_layout.size
        return {"l1": L1_ENTRIES * way + (L1_ENTRIES - 1), "l2": L2_ENTRIES * way + 6}

    def elaborate(self, platform):
        m = Module()
        m.submodules.front = front = Front(self.lanes)
        m.submodules.engine = engine = Engine(self.lanes)
        m.submodules.checker = checker = Checker(self.lanes, _formal_mutant=self._formal_mutant)
        # no request while the engine zeroes its L2 entries after reset (scrub_cycles)
        m.d.comb += [front.req.valid.eq(self.req.valid & ~engine.scrubbing),
                     front.req.payload.eq(self.req.payload),
                     self.req.ready.eq(front.req.ready & ~engine.scrubbing)]
        wiring.connect(m, front.o, engine.i)
        wiring.connect(m, engine.o, checker.i)
        wiring.connect(m, engine.mem_req, wiring.flipped(self.mem_req))
        wiring.connect(m, wiring.flipped(self.mem_resp), engine.mem_resp)
        m.d.comb += [
            front.id_key.eq(self.id_key),
            front.launch.eq(self.launch),
            engine.id_key.eq(self.id_key),
            engine.rbt_base.eq(self.rbt_base),
            engine.kernel_id.eq(self.kernel_id),
            engine.launch.eq(self.launch),
            self.l1_hits.eq(engine.l1_hits),
            self.l2_hits.eq(engine.l2_hits),
            self.misses.eq(engine.misses),
        ]

        answer = checker.o.payload
        m.d.comb += [
            self.resp.valid.eq(checker.o.valid),
            checker.o.ready.eq(self.resp.ready),
            self.resp.payload.tag.eq(answer.tag),
            self.resp.payload.ok.eq(answer.cause == Cause.NONE),
            self.resp.payload.cause.eq(answer.cause),
        ]
        failed = wire(m, self.resp.valid & self.resp.ready & (answer.cause != Cause.NONE), "failed")
        m.d.comb += self.exc.eq(self.precise & failed)

        # The violation log; a launch clears it (it belongs to a kernel).
        log_first = Signal(log_layout(self.lanes))
        log_count = Signal(COUNTER_BITS)
        with m.If(failed):
            with m.If(log_count == 0):
                m.d.sync += log_first.eq(answer)
            with m.If(~log_count.all()):
                m.d.sync += log_count.eq(increment(m, log_count, "log_inc"))
        with m.If(self.launch):
            m.d.sync += [log_count.eq(0), log_first.eq(0)]
        m.d.comb += [self.log_first.eq(log_first), self.log_count.eq(log_count)]
        return m
