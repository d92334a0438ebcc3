"""``Checker``: the BCU's bounds comparator and answer, three registered stages.

C1 holds a micro-op with its RCache entry and computes the entry's limit
``base + size`` (a log-depth adder, the deepest step), the end of the group's access
``max + bytes`` and the underflow ``min < base``; C2 compares the end with the limit and
picks the cause (invalid entry (4) before other kernel (3) before out of bounds (1)
before store to read-only (2)) and the lane to log; OUT holds the request's answer — the
first failing group's cause, lane and address when a warp was split into several micro-ops
— and drives the response. Each stage is a full-throughput register with back-pressure.
"""
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import add, wire

from .layout import SLOT_BITS, TAG_BITS, VA_BITS, Cause, check_lanes, check_layout, lane_bits, log_layout
from .pipe import add_small, stage

__all__ = ["Checker", "answer_layout", "MUTANTS"]

MUTANTS = (None, "ignore_size", "end_last_byte",     # test-only (formal/gpushield.py)
           "limit_exclusive", "bounds_before_kernel", "under_logs_high", "last_group_logged")


def answer_layout(lanes=32):
    """A request's answer: what ``log_first`` records, and the kernel slot whose log it
    goes to."""
    return data.StructLayout({"log": log_layout(lanes), "slot": SLOT_BITS})


class Checker(wiring.Component):
    """Micro-ops with their entry in (``check_layout``), one answer per request out
    (:func:`answer_layout`: tag, cause, and the lane and address to log when it fails; the
    request's slot)."""

    def __init__(self, lanes=32, *, _formal_mutant=None):
        self.lanes = check_lanes(lanes)
        # test-only seeded bugs for formal/gpushield.py (never set in a design):
        # "ignore_size" ends a group's access at its last lane's first byte; "end_last_byte"
        # ends it at its last byte (hi + bytes - 1), compared against the one-past limit;
        # "limit_exclusive" refuses an access that ends exactly at the limit; "bounds_before_kernel"
        # ranks out of bounds (1) before other kernel (3); "under_logs_high" logs the highest lane
        # of a group that both starts below the buffer and ends past it; "last_group_logged"
        # answers a split warp with its last failing group instead of its first
        if _formal_mutant not in MUTANTS:
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        lb = lane_bits(lanes)
        self._c2 = data.StructLayout({
            "lookup": 1, "cause": Cause, "valid": 1, "kernel_ok": 1, "read_only": 1,
            "store": 1, "under": 1,
            "end": VA_BITS + 1,     # one past the group's last byte
            "limit": VA_BITS + 1,   # one past the buffer's last byte
            "lo": VA_BITS, "lane_lo": lb, "hi": VA_BITS, "lane_hi": lb,
            "tag": TAG_BITS, "last": 1, "slot": SLOT_BITS,
        })
        super().__init__({
            "i": In(stream.Signature(check_layout(lanes))),
            "o": Out(stream.Signature(answer_layout(lanes))),
        })

    def elaborate(self, platform):
        m = Module()
        c1_valid, c1, c1_ready, c1_accept = stage(m, check_layout(self.lanes), self.i.valid,
                                                  self.i.payload, "c1")
        m.d.comb += self.i.ready.eq(c1_accept)

        c2_in = Signal(self._c2, name="c2_in")
        entry = c1.entry
        m.d.comb += [
            c2_in.limit.eq(add(m, entry.base, entry.size, VA_BITS + 1, "limit")),
            c2_in.end.eq(add_small(m, c1.hi, self._access_bytes(c1.size_log2), "end")),
            c2_in.under.eq(c1.lo < entry.base),
            c2_in.valid.eq(entry.valid),
            c2_in.kernel_ok.eq(entry.kernel_ok),
            c2_in.read_only.eq(entry.read_only),
        ]
        for name in ("lookup", "cause", "store", "lo", "lane_lo", "hi", "lane_hi", "tag", "last", "slot"):
            m.d.comb += getattr(c2_in, name).eq(getattr(c1, name))
        c2_valid, c2, c2_ready, c2_accept = stage(m, self._c2, c1_valid, c2_in, "c2")
        m.d.comb += c1_ready.eq(c2_accept)

        answer = self._cause(m, c2, wire(m, c2_valid & c2_ready, "c2_done"))
        out_valid, out, out_ready, out_accept = stage(m, answer_layout(self.lanes),
                                                      c2_valid & c2.last, answer, "out")
        m.d.comb += [
            c2_ready.eq(~c2.last | out_accept),
            self.o.valid.eq(out_valid),
            self.o.payload.eq(out),
            out_ready.eq(self.o.ready),
        ]
        return m

    def _access_bytes(self, size_log2):
        """The bytes of one lane's access, 4 bits (a mutant's otherwise)."""
        if self._formal_mutant == "ignore_size":
            return Const(1, 4)
        if self._formal_mutant == "end_last_byte":
            return ((Const(1, 4) << size_log2) - 1)[:4]
        return (Const(1, 4) << size_log2)[:4]

    def _cause(self, m, c2, done):
        """The cause of C2's group and the request's answer so far (the first failing
        group of a split warp); *done*: C2's micro-op leaves this cycle."""
        mutant = self._formal_mutant
        over = (c2.end >= c2.limit) if mutant == "limit_exclusive" else (c2.end > c2.limit)
        if mutant == "bounds_before_kernel":
            l_cause = wire(m, Mux(~c2.valid, Cause.INVALID_ENTRY.value,
                                  Mux(c2.under | over, Cause.OUT_OF_BOUNDS.value,
                                      Mux(~c2.kernel_ok, Cause.KERNEL.value,
                                          Mux(c2.store & c2.read_only, Cause.READ_ONLY.value,
                                              Cause.NONE.value)))), "l_cause")
        else:
            l_cause = wire(m, Mux(~c2.valid, Cause.INVALID_ENTRY.value,
                                  Mux(~c2.kernel_ok, Cause.KERNEL.value,
                                      Mux(c2.under | over, Cause.OUT_OF_BOUNDS.value,
                                          Mux(c2.store & c2.read_only, Cause.READ_ONLY.value,
                                              Cause.NONE.value)))), "l_cause")
        cause = wire(m, Mux(c2.lookup, l_cause, c2.cause), "cause")
        # an overflow logs the lane that went furthest, anything else the lowest lane
        if mutant == "under_logs_high":
            hi_side = wire(m, c2.lookup & c2.valid & c2.kernel_ok & over, "hi_side")
        else:
            hi_side = wire(m, c2.lookup & c2.valid & c2.kernel_ok & ~c2.under & over, "hi_side")
        this_lane = Mux(hi_side, c2.lane_hi, c2.lane_lo)
        this_addr = Mux(hi_side, c2.hi, c2.lo)

        acc_cause = Signal(Cause, name="first_cause")    # NONE: no group failed yet
        acc_lane = Signal(lane_bits(self.lanes), name="first_lane")
        acc_addr = Signal(VA_BITS, name="first_addr")
        use_acc = wire(m, acc_cause.as_value() != 0, "use_first")
        with m.If(done):
            with m.If(c2.last):
                m.d.sync += acc_cause.eq(Cause.NONE)
            with m.Elif((1 if mutant == "last_group_logged" else ~use_acc) & (cause != 0)):
                m.d.sync += [acc_cause.eq(cause), acc_lane.eq(this_lane), acc_addr.eq(this_addr)]

        answer = Signal(answer_layout(self.lanes), name="answer")
        m.d.comb += [
            answer.log.tag.eq(c2.tag),
            answer.log.cause.eq(Mux(use_acc, acc_cause, cause)),
            answer.log.lane.eq(Mux(use_acc, acc_lane, this_lane)),
            answer.log.addr.eq(Mux(use_acc, acc_addr, this_addr)),
            answer.slot.eq(c2.slot),
        ]
        return answer
