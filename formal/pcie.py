"""``pcie_rdtable`` (hw/pcie): the error counters saturate; completions against a record of the reads.

Design of ``counters_saturate``: ``PcieReadTable()`` with the parameters of the
``pcie_rdtable`` design (256 entries).

Environment: every input free in every cycle, the reset too (``Harness(reset="free")``),
and the first cycle starts from any state of the table, so the counters start anywhere,
their ceiling 2³² − 1 included.

Property ``counters_saturate``: from one cycle to the next, ``err_count`` and
``timeout_count`` each hold or count up by one, unless the reset was high: at 2³² − 1
they hold. No simulation reaches that ceiling (2³² bad completions or timeouts), which is
why the ``Mux`` arm that holds it is the one uncovered line of the table's counters
(docs/coverage.md). Proved by 1-induction: the check is about one transition, from any
state.

Property ``completion_accounting`` (``PcieReadTable(entries=4, rcb=64, max_payload=128,
max_read=128)``: 4 tags, reads of 1 .. 8 granules of 16 bytes). The harness keeps its own
record of the reads: a tag becomes outstanding when a request leaves on ``req_o`` with it,
with the granules it asked for, and its remaining granules fall by the length of each
completion that leaves on ``cpl_o``. Checked in every cycle, from the ports alone:

- a request leaves with a tag < ``entries`` that the record has free (``alloc_free``);
- a completion leaves (its first beat on ``cpl_o``) only for a tag the record has
  outstanding (``cpl_outstanding``) and for no more granules than it still expects
  (``cpl_within_length``): a completion for a free tag or past the requested length is
  not delivered;
- its ``cc`` is set exactly when it carries the read's last granules (``cc_only_last``);
  only then does the record free the tag;
- ``outstanding`` equals the number of tags the record holds (``outstanding_as_record``): a
  tag is freed by the table only on the completion with ``cc``, never early;
- every completion packet taken on ``cpl_i`` (its first beat: the beat after a ``last``)
  has exactly one outcome: it leaves on ``cpl_o`` or ``err_count`` counts it with a cause
  other than FRAMING (``outcome_of_a_packet``: no outcome without a packet;
  ``every_packet_delivered_or_counted``: at most two packets, the one in the check
  register and the one checked in the cycle before, wait for theirs): a refused
  completion is counted.

Environment: requests as the SXP sends them (docs/pcie.md, "Read requests": address and
length whole granules, 16 .. ``max_read`` bytes, not past 2^32); completions, ready
signals and the reset free; ``timeout`` = 0 (the completion timeout, which frees tags on
its own, is not modelled). Bounded: the record and the table are not related by an
inductive invariant.
"""
from amaranth.hdl import Signal

from hw.pcie import PcieReadTable
from hw.pcie.layout import GRANULE_BITS, Cause

from . import Harness, Property, free_inputs, with_mutant, with_mutants

__all__ = ["PROPERTIES"]


def counters_saturate(mutant=None):
    h = Harness(reset="free")
    dut = PcieReadTable(_formal_mutant=mutant)
    h.m.submodules.dut = dut
    free_inputs(h.m, dut)
    for counter in ("err_count", "timeout_count"):
        h.counts_by_one(counter, getattr(dut, counter), h.rst)
    h.notes.append("PcieReadTable() (256 entries); reset and inputs free in every cycle, any initial state")
    return h


PROPERTIES = [
    *with_mutant(Property("pcie_rdtable", "counters_saturate", counters_saturate, depth=2, induction=1,
                          doc="err_count and timeout_count hold or count up by one unless reset: "
                              "they hold at 2^32 - 1"),
                 "counters_wrap", "the counters count on past 2^32 - 1 (to 0)"),
]


SMALL = {"entries": 4, "rcb": 64, "max_payload": 128, "max_read": 128}


def _popcount(bits):
    return sum(bits[k] for k in range(len(bits)))


def completion_accounting(mutant=None, params=None):
    params = dict(SMALL if params is None else params)
    h = Harness()
    m = h.m
    dut = PcieReadTable(**params, _formal_mutant=mutant)
    m.submodules.dut = dut
    free_inputs(m, dut)
    n, max_read = params["entries"], params["max_read"]
    h.assume(dut.timeout == 0)
    req = dut.req_i.payload.hdr
    granule = 1 << GRANULE_BITS
    h.assume(~dut.req_i.valid | ((req.addr[:GRANULE_BITS] == 0) & (req.length[:GRANULE_BITS] == 0) &
                                 (req.length >= granule) & (req.length <= max_read) &
                                 ((req.addr + req.length) <= (1 << 32))))

    # a beat is new on an output when it was not there, unaccepted, in the cycle before
    req_stalled = Signal(name="req_o_stalled")
    cpl_stalled = Signal(name="cpl_o_stalled")
    m.d.sync += [req_stalled.eq(dut.req_o.valid & ~dut.req_o.ready),
                 cpl_stalled.eq(dut.cpl_o.valid & ~dut.cpl_o.ready)]
    new_req = dut.req_o.valid & ~req_stalled
    cpl = dut.cpl_o.payload
    new_cpl = dut.cpl_o.valid & ~cpl_stalled & cpl.first

    units_bits = (max_read >> GRANULE_BITS).bit_length()
    held = Signal(n, name="rec_outstanding")
    left = [Signal(units_bits, name=f"rec_left{t}") for t in range(n)]
    held_next = Signal(n, name="rec_outstanding_next")
    r_tag, c_tag = dut.req_o.payload.hdr.tag, cpl.hdr.tag
    c_units = cpl.hdr.length[GRANULE_BITS:]
    c_left = Signal(units_bits, name="cpl_rec_left")
    c_held = Signal(name="cpl_rec_outstanding")
    idx_bits = (n - 1).bit_length()
    m.d.comb += [c_left.eq(0), c_held.eq(0)]
    for t in range(n):
        with m.If(c_tag == t):
            m.d.comb += [c_left.eq(left[t]), c_held.eq(held[t])]
    r_free = Signal(name="req_rec_free")
    m.d.comb += r_free.eq((r_tag < n) & ~held.bit_select(r_tag[:idx_bits], 1))
    m.d.comb += held_next.eq(held)
    for t in range(n):
        with m.If(new_cpl & (c_tag == t)):
            m.d.sync += left[t].eq(left[t] - c_units)
            with m.If(c_units >= left[t]):
                m.d.comb += held_next[t].eq(0)
        with m.If(new_req & (r_tag == t)):
            m.d.comb += held_next[t].eq(1)
            m.d.sync += left[t].eq(dut.req_o.payload.hdr.length[GRANULE_BITS:])
    m.d.sync += held.eq(held_next)
    now = ~h.rst
    h.check("alloc_free", r_free, guard=now & new_req)
    h.check("cpl_outstanding", c_held & (c_tag < n), guard=now & new_cpl)
    h.check("cpl_within_length", c_units <= c_left, guard=now & new_cpl)
    h.check("cc_only_last", cpl.hdr.cc == (c_units == c_left), guard=now & new_cpl)
    h.check("outstanding_as_record", dut.outstanding == _popcount(held_next), guard=now)
    # every completion packet taken on cpl_i has one outcome, a cycle after its check: it
    # leaves on cpl_o, or it is dropped and counted (err_count moves, cause not FRAMING)
    in_packet = Signal(name="cpl_in_packet")
    cpl_take = dut.cpl_i.valid & dut.cpl_i.ready
    with m.If(cpl_take):
        m.d.sync += in_packet.eq(~dut.cpl_i.payload.last)
    err_before = Signal.like(dut.err_count, name="err_count_before")
    m.d.sync += err_before.eq(dut.err_count)
    counted = (dut.err_count != err_before) & (dut.err_cause != Cause.FRAMING)
    outcome = Signal(name="cpl_outcome")
    m.d.comb += outcome.eq(new_cpl | counted)
    pending = Signal(range(8), name="cpl_pending")      # packets taken, outcome not yet seen
    m.d.sync += pending.eq(pending + (cpl_take & ~in_packet) - outcome)
    h.check("outcome_of_a_packet", pending != 0, guard=now & outcome)
    h.check("every_packet_delivered_or_counted", pending <= 2, guard=now)
    h.notes.append(f"PcieReadTable({params}); timeout = 0; requests as the SXP sends them")
    return h


PROPERTIES += [
    *with_mutants(Property("pcie_rdtable", "completion_accounting", completion_accounting, depth=18,
                           params=SMALL, fast=False,
                           depth_reason="18 steps: the reset and the 4-cycle row scrub, then two reads "
                                        "allocated back to back and each answered by two completions "
                                        "(first beats on cpl_i one per cycle, 2 cycles to cpl_o), "
                                        "and a third request reusing a freed tag",
                           doc="completions leave only for outstanding tags, within the requested "
                               "length, cc exactly on the last; tags freed only then (4 entries)"),
                  ("accept_free", "a completion for a free tag passes the tag check"),
                  ("cc_every", "cc is set on every completion, the first of a split read too"),
                  ("free_early", "the tag is freed on every good completion, not only the last"),
                  ("left_off_by_one", "a completion writes back one granule too few still expected"),
                  ("uncounted_unknown", "a completion for an unknown tag is dropped without being counted")),
]
