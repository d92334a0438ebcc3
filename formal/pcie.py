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
signals and the reset free; ``timeout`` = 0 (the timeout is ``timeout_expiry``'s).
Bounded: the record and the table are not related by an inductive invariant.

Property ``completion_routing`` (same table and record, which also keeps each read's
tile, key context, ``aes`` and next address): a completion leaves with its read's trusted
header (tile, key context, ``aes`` of the request of its tag; the address the read expects
next) and every beat with its own data. The host labels each beat with its byte address
(XOR a solver-chosen constant) and frames packets correctly; the rest is free. Bounded.

Property ``timeout_expiry`` (same table, ``timeout`` a constant T in 1 .. 8): a read is
reported by ``timeout_count`` only while outstanding and more than T cycles after its
request; no completion leaves whose check came more than 5·⌈T / 4⌉ cycles after its
request; ``outstanding`` as the record. Bounded.

Property ``table_bookkeeping`` (same table, every input and the reset free, ``timeout`` at
full width): ``outstanding`` equals the number of ``valid`` bits in every state. Property
``timeout_tick_period`` (same table, ``timeout`` any 32-bit constant): the timeout tick
every ⌈T / 4⌉ cycles, with the counter's invariant. Property ``entry_ageing`` (same
table, everything free): per entry, the age from allocation, per tick, to expiry, the report
and the free of the lowest expired tag, no completion for an expired entry. These three start from a reset of any
state or from any state where their invariant holds, so their 2-step BMC is a proof (and
their 1-induction closes): full width, any depth.

Property ``completion_framing`` (same table, everything free but the reset; bounded, 8
steps from any table state with the completion path idle): every completion on ``cpl_o``
has its first beat after the previous one's last and its last on length / 16 beats.
"""
from types import SimpleNamespace

from amaranth.hdl import Cat, Mux, Signal

from hw.pcie import PcieReadTable
from hw.pcie.layout import GRANULE_BITS, Cause
from hw.pcie.rdtable import AGE_EXPIRED
from hw.sxp.packet import Kind

from . import Harness, Property, free_inputs, freeze, registers, with_mutant, with_mutants

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


def _requests_as_the_sxp(h, dut, max_read):
    """Assume read requests as the SXP sends them (docs/pcie.md, "Read requests"): address
    and length whole granules, 16 .. *max_read* bytes, not past 2^32."""
    req = dut.req_i.payload.hdr
    granule = 1 << GRANULE_BITS
    h.assume(~dut.req_i.valid | ((req.addr[:GRANULE_BITS] == 0) & (req.length[:GRANULE_BITS] == 0) &
                                 (req.length >= granule) & (req.length <= max_read) &
                                 ((req.addr + req.length) <= (1 << 32))))


def _reads_record(h, dut, params, age_cap=0):
    """The harness's own record of the reads, from the ports alone: a tag is outstanding
    from the request that leaves on ``req_o`` with it (with the granules it asked for, its
    address, tile, key context and ``aes``) until a completion leaving on ``cpl_o`` takes
    its last granules off, or ``timeout_count`` reports it. With *age_cap*, each tag also
    counts the cycles since its request was taken (1 in the cycle its request is on
    ``req_o``, saturating at *age_cap*). Returns a namespace of the record's signals and
    of the events it follows (``new_req``, ``new_cpl``, ``c_*`` for the completion's tag)."""
    m, n = h.m, params["entries"]
    rec = SimpleNamespace(n=n)
    # a beat is new on an output when it was not there, unaccepted, in the cycle before
    req_stalled = Signal(name="req_o_stalled")
    cpl_stalled = Signal(name="cpl_o_stalled")
    m.d.sync += [req_stalled.eq(dut.req_o.valid & ~dut.req_o.ready),
                 cpl_stalled.eq(dut.cpl_o.valid & ~dut.cpl_o.ready)]
    rec.new_req = new_req = dut.req_o.valid & ~req_stalled
    rec.cpl = cpl = dut.cpl_o.payload
    rec.new_cpl = new_cpl = dut.cpl_o.valid & ~cpl_stalled & cpl.first
    units_bits = (params["max_read"] >> GRANULE_BITS).bit_length()
    addr_bits = 32 - GRANULE_BITS
    rec.held = held = Signal(n, name="rec_outstanding")
    rec.held_next = held_next = Signal(n, name="rec_outstanding_next")
    fields = {"left": units_bits, "next": addr_bits, "tile": len(cpl.hdr.tile),
              "key_index": len(cpl.hdr.key_index), "aes": 1}
    if age_cap:
        fields["age"] = range(age_cap + 1)
    table = {f: [Signal(shape, name=f"rec_{f}{t}") for t in range(n)] for f, shape in fields.items()}
    r_hdr = dut.req_o.payload.hdr
    rec.r_tag, rec.c_tag = r_tag, c_tag = r_hdr.tag, cpl.hdr.tag
    rec.c_units = c_units = cpl.hdr.length[GRANULE_BITS:]
    # the completion's tag's record (zero for a tag >= entries)
    rec.c_held = Signal(name="cpl_rec_outstanding")
    m.d.comb += rec.c_held.eq(0)
    for f, shape in fields.items():
        setattr(rec, f"c_{f}", Signal(shape, name=f"cpl_rec_{f}"))
        m.d.comb += getattr(rec, f"c_{f}").eq(0)
    for t in range(n):
        with m.If(c_tag == t):
            m.d.comb += rec.c_held.eq(held[t])
            m.d.comb += [getattr(rec, f"c_{f}").eq(table[f][t]) for f in fields]
    idx_bits = (n - 1).bit_length()
    rec.r_free = Signal(name="req_rec_free")
    m.d.comb += rec.r_free.eq((r_tag < n) & ~held.bit_select(r_tag[:idx_bits], 1))
    # a tag reported by the completion timeout (timeout_count moves, timeout_tag names it)
    to_before = Signal.like(dut.timeout_count, name="timeout_count_before")
    m.d.sync += to_before.eq(dut.timeout_count)
    rec.timed_out = Signal(name="timeout_reported")
    m.d.comb += rec.timed_out.eq(dut.timeout_count != to_before)
    m.d.comb += held_next.eq(held)
    for t in range(n):
        if age_cap:
            age = table["age"][t]
            with m.If(age != age_cap):
                m.d.sync += age.eq(age + 1)
        with m.If(rec.timed_out & (dut.timeout_tag == t)):
            m.d.comb += held_next[t].eq(0)
        with m.If(new_cpl & (c_tag == t)):
            m.d.sync += [table["left"][t].eq(table["left"][t] - c_units),
                         table["next"][t].eq(table["next"][t] + c_units)]
            with m.If(c_units >= table["left"][t]):
                m.d.comb += held_next[t].eq(0)
        with m.If(new_req & (r_tag == t)):
            m.d.comb += held_next[t].eq(1)
            m.d.sync += [table["left"][t].eq(r_hdr.length[GRANULE_BITS:]),
                         table["next"][t].eq(r_hdr.addr[GRANULE_BITS:]),
                         table["tile"][t].eq(r_hdr.tile), table["key_index"][t].eq(r_hdr.key_index),
                         table["aes"][t].eq(r_hdr.aes)]
            if age_cap:
                m.d.sync += table["age"][t].eq(2)
    m.d.sync += held.eq(held_next)
    rec.table = table
    return rec


def _table(mutant, params):
    """``(harness, dut, params)``: ``PcieReadTable(**params)`` (``SMALL`` when None) with
    every input free and read requests as the SXP sends them."""
    params = dict(SMALL if params is None else params)
    h = Harness()
    dut = PcieReadTable(**params, _formal_mutant=mutant)
    h.m.submodules.dut = dut
    free_inputs(h.m, dut)
    _requests_as_the_sxp(h, dut, params["max_read"])
    return h, dut, params


def completion_accounting(mutant=None, params=None):
    h, dut, params = _table(mutant, params)
    m = h.m
    h.assume(dut.timeout == 0)
    rec = _reads_record(h, dut, params)
    n, cpl, c_tag, c_units = rec.n, rec.cpl, rec.c_tag, rec.c_units
    now = ~h.rst
    h.check("alloc_free", rec.r_free, guard=now & rec.new_req)
    h.check("cpl_outstanding", rec.c_held & (c_tag < n), guard=now & rec.new_cpl)
    h.check("cpl_within_length", c_units <= rec.c_left, guard=now & rec.new_cpl)
    h.check("cc_only_last", cpl.hdr.cc == (c_units == rec.c_left), guard=now & rec.new_cpl)
    h.check("outstanding_as_record", dut.outstanding == _popcount(rec.held_next), guard=now)
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
    m.d.comb += outcome.eq(rec.new_cpl | counted)
    pending = Signal(range(8), name="cpl_pending")      # packets taken, outcome not yet seen
    m.d.sync += pending.eq(pending + (cpl_take & ~in_packet) - outcome)
    h.check("outcome_of_a_packet", pending != 0, guard=now & outcome)
    h.check("every_packet_delivered_or_counted", pending <= 2, guard=now)
    h.notes.append(f"PcieReadTable({params}); timeout = 0; requests as the SXP sends them")
    return h


def _beat_label(addr, mask):
    """The data a labelled completion beat carries: its own byte address in every 32-bit
    word, XORed with a constant *mask* (so that every data bit takes both values)."""
    words = len(mask) // 32
    return Cat(*([addr[:32]] * words)) ^ mask


def completion_routing(mutant=None, params=None):
    """Every completion leaves with its read's trusted header and its own data: the tile,
    key context and ``aes`` of the request whose tag it carries, the address that read
    expects next, and each beat the data that came in with it. The host labels every beat
    with its address (:func:`_beat_label`) and frames its packets correctly (one beat per
    granule of the header's length, 1 .. ``max_payload``); everything else is free."""
    h, dut, params = _table(mutant, params)
    m = h.m
    h.assume(dut.timeout == 0)
    rec = _reads_record(h, dut, params)
    granule = 1 << GRANULE_BITS
    mask = h.any_const(len(dut.cpl_i.payload.data), "data_mask")
    # the host's packets: the first beat after a `last` starts one; its header's length
    # says how many beats follow; every beat carries its address
    ci = dut.cpl_i.payload
    in_packet = Signal(name="cpl_in_packet")
    in_base = Signal(32, name="cpl_in_base")
    in_beat = Signal(range(params["max_payload"] // granule + 1), name="cpl_in_beat")
    in_units = Signal.like(in_beat, name="cpl_in_units")
    first_in = ~in_packet
    units = Mux(first_in, ci.hdr.length[GRANULE_BITS:], in_units)
    beat = Mux(first_in, 0, in_beat)
    base = Mux(first_in, ci.hdr.addr, in_base)
    h.assume(~dut.cpl_i.valid | ~first_in | ((ci.hdr.length[:GRANULE_BITS] == 0) & (ci.hdr.length >= granule)
                                             & (ci.hdr.length <= params["max_payload"])))
    h.assume(~dut.cpl_i.valid | (ci.last == (beat + 1 == units)))
    h.assume(~dut.cpl_i.valid | (ci.data == _beat_label(base + (beat << GRANULE_BITS), mask)))
    with m.If(dut.cpl_i.valid & dut.cpl_i.ready):
        m.d.sync += [in_packet.eq(~ci.last), in_base.eq(base), in_beat.eq(beat + 1), in_units.eq(units)]
    # the beats leaving: each carries the label of its own address
    co = dut.cpl_o.payload
    out_base = Signal(32, name="cpl_out_base")
    out_beat = Signal.like(in_beat, name="cpl_out_beat")
    o_base = Mux(co.first, co.hdr.addr, out_base)
    o_beat = Mux(co.first, 0, out_beat)
    with m.If(dut.cpl_o.valid & dut.cpl_o.ready):
        m.d.sync += [out_base.eq(o_base), out_beat.eq(o_beat + 1)]
    now = ~h.rst
    hdr = rec.cpl.hdr
    h.check("cpl_outstanding", rec.c_held & (rec.c_tag < rec.n), guard=now & rec.new_cpl)
    h.check("tile_of_request", hdr.tile == rec.c_tile, guard=now & rec.new_cpl)
    h.check("key_of_request", (hdr.key_index == rec.c_key_index) & (hdr.aes == rec.c_aes),
            guard=now & rec.new_cpl)
    h.check("address_expected", (hdr.addr[GRANULE_BITS:] == rec.c_next) & (hdr.addr[:GRANULE_BITS] == 0),
            guard=now & rec.new_cpl)
    h.check("kind_completion", hdr.kind == Kind.READ_CPL, guard=now & rec.new_cpl)
    h.check("data_of_beat", co.data == _beat_label(o_base + (o_beat << GRANULE_BITS), mask),
            guard=now & dut.cpl_o.valid)
    h.notes.append(f"PcieReadTable({params}); timeout = 0; requests as the SXP sends them; "
                   "completion beats framed and labelled with their address")
    return h


def _frozen_table(mutant):
    """``(harness, dut, registers)``: ``PcieReadTable(**SMALL)`` (the netlist of the other
    harnesses, which ``make mutate`` needs), every input and the reset free, elaborated once
    so that the harness can read its registers by name."""
    h = Harness(reset="free")
    dut = PcieReadTable(**SMALL, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    return h, dut, dict(registers(fragment))


def _invariant(h, name, cond, guard=None):
    """Check *cond* (where *guard* holds) in every cycle after the first, and assume it in
    the first unless that is a reset cycle: the first transition then starts from any state
    where the invariant holds (its inductive step) or from a reset of any state (its base),
    so a BMC of 2 steps is the proof, and a seeded bug that breaks it fails within 2 steps."""
    h.check(name, cond, guard)
    holds = cond if guard is None else (~guard | cond)
    h.assume(~(h.first & ~h.rst) | holds)


def table_bookkeeping(mutant=None):
    """``outstanding`` is the number of valid entries in every cycle: every event that
    moves one moves the other by the same amount — an allocation, a completion that frees
    its entry, an expiry, a completion's free and an expiry of another entry in one cycle.
    Everything free (requests, completions, ``timeout`` at full width, ready, reset)."""
    h, dut, regs = _frozen_table(mutant)
    _invariant(h, "outstanding_is_valid_count", dut.outstanding == _popcount(regs["valid"]))
    h.notes.append(f"PcieReadTable({SMALL}); every input and the reset free; first state any "
                   "where the invariant holds, or a reset")
    return h


def timeout_tick_period(mutant=None):
    """The completion-timeout tick (docs/pcie.md, "Completion timeout"): with ``timeout`` a
    constant T of the full 32 bits, T > 0, the first tick comes P + 1 cycles after the reset
    is released and then one every P = ceil(T / 4) cycles, no sooner and no later; with T = 0
    there is none. The tick is the table's internal ``tick`` register (it ages every live
    entry by one); relations between it and the counter that makes it (``tick_last``,
    ``timer_on``, ``tick_count``) are part of the invariant, which is what lets it be proved
    at the full width in one step."""
    h, dut, regs = _frozen_table(mutant)
    m = h.m
    limit = h.any_const(32, "timeout_T")
    h.assume(dut.timeout == limit)
    period = Signal(31, name="spec_period")            # ceil(T / 4), up to 2^30
    m.d.comb += period.eq((limit + 3) >> 2)
    on = limit != 0
    tick, tcount, last, timer_on = regs["tick"], regs["tick_count"], regs["tick_last"], regs["timer_on"]
    after_reset = h.past(h.rst, "reset_prev")          # the cycle after a reset cycle
    since = h.since(1 << 31)                           # cycles since the reset was released
    seen = Signal(name="tick_seen")                    # a tick since the reset
    gap = Signal(32, name="tick_gap")                  # cycles since the latest tick
    with m.If(tick):
        m.d.sync += [seen.eq(1), gap.eq(1)]
    with m.Else():
        m.d.sync += gap.eq(gap + 1)
    # the behaviour: ticks exactly every P cycles, the first P + 1 after the reset
    _invariant(h, "no_tick_when_off", ~tick, guard=~on)
    _invariant(h, "tick_every_period", gap == period, guard=on & tick & seen)
    _invariant(h, "no_tick_early", gap < period, guard=on & ~tick & seen)
    _invariant(h, "first_tick", since == period + 1, guard=on & tick & ~seen)
    _invariant(h, "first_tick_not_late", since <= period, guard=on & ~tick & ~seen)
    # the rest of the invariant: the registered period, the counter's range, its relation
    # to the harness's count of cycles
    _invariant(h, "period_registered", last == period - 1, guard=on)
    _invariant(h, "reset_state", ~timer_on & (tcount == 0) & ~tick & ~seen & (since == 0), guard=after_reset)
    _invariant(h, "timer_on_registered", timer_on == on, guard=~after_reset)
    _invariant(h, "count_within_period", tcount < period, guard=on)
    _invariant(h, "count_zero_at_tick", tcount == 0, guard=on & tick)
    _invariant(h, "count_is_gap", tcount == gap, guard=on & ~tick & seen)
    _invariant(h, "count_before_first", since == tcount + timer_on, guard=on & ~tick & ~seen)
    h.notes.append(f"PcieReadTable({SMALL}); timeout a constant of 32 bits; the internal tick, "
                   "tick_count, tick_last and timer_on read by name; reset free; first state any "
                   "where the invariant holds, or a reset")
    return h


def entry_ageing(mutant=None):
    """The ageing of the entries by the timeout tick (docs/pcie.md, "Completion timeout"),
    one transition at a time from any state: a valid entry's age (its three bit planes,
    read by name) is at most 5 (``AGE_EXPIRED``); an allocation starts its tag at age 0; a
    live entry (valid, age < 5) gains one per tick and holds otherwise; an expired one
    (age 5) stays so until it is freed, which happens only when ``timeout_count`` reports
    it as the lowest expired tag; and no completion leaves whose check saw its entry expired
    or free. ``timeout`` and every other input free (the tick is whatever the timer makes,
    ``timeout_tick_period`` says when)."""
    h, dut, regs = _frozen_table(mutant)
    n = SMALL["entries"]
    planes = [regs[f"age_bit{k}"] for k in range(3)]
    valid, tick = regs["valid"], regs["tick"]
    ages = [Cat(*(plane[t] for plane in planes)) for t in range(n)]
    prev_ages = [h.past(ages[t], f"age{t}_prev") for t in range(n)]
    prev_valid = h.past(valid, "valid_prev")
    prev_tick = h.past(tick, "tick_prev")
    prev_rst = h.past(h.rst, "reset_prev")
    # events at the ports: a request newly on req_o was allocated at the last edge; a
    # completion newly on cpl_o was checked in the cycle before; a report moves timeout_count
    req_stalled = h.past(dut.req_o.valid & ~dut.req_o.ready, "req_o_stalled")
    cpl_stalled = h.past(dut.cpl_o.valid & ~dut.cpl_o.ready, "cpl_o_stalled")
    new_req = dut.req_o.valid & ~req_stalled
    new_cpl = dut.cpl_o.valid & ~cpl_stalled & dut.cpl_o.payload.first
    prev_count = h.past(dut.timeout_count, "timeout_count_prev")
    reported = dut.timeout_count != prev_count
    saturated = prev_count == (1 << len(dut.timeout_count)) - 1   # a report would not show
    now = ~prev_rst
    for t in range(n):
        age, was = ages[t], prev_ages[t]
        was_expired = prev_valid[t] & (was == AGE_EXPIRED)
        _invariant(h, f"age_at_most_expired{t}", age <= AGE_EXPIRED, guard=valid[t])
        h.check(f"age_zero_on_alloc{t}", age == 0, guard=now & new_req & (dut.req_o.payload.hdr.tag == t))
        h.check(f"age_counts_ticks{t}", age == was + prev_tick,
                guard=now & prev_valid[t] & (was != AGE_EXPIRED))
        freed_here = reported & (dut.timeout_tag == t)
        h.check(f"expired_until_reported{t}", valid[t] & (age == AGE_EXPIRED),
                guard=now & was_expired & ~freed_here & ~saturated)
        h.check(f"report_frees{t}", ~valid[t], guard=now & freed_here)
        h.check(f"report_lowest_expired{t}",
                was_expired & ~Cat(*(prev_valid[u] & (prev_ages[u] == AGE_EXPIRED) for u in range(t))).any()
                if t else was_expired, guard=now & freed_here)
        h.check(f"no_completion_when_expired{t}", prev_valid[t] & (was != AGE_EXPIRED),
                guard=now & new_cpl & (dut.cpl_o.payload.hdr.tag == t))
    h.check("no_report_beyond_entries", dut.timeout_tag < n, guard=now & reported)
    h.notes.append(f"PcieReadTable({SMALL}); every input and the reset free; the age planes, valid and "
                   "tick read by name; first state any where valid ages are at most 5, or a reset")
    return h


def completion_framing(mutant=None):
    """Every completion leaves ``cpl_o`` framed by its own header (docs/pcie.md: "a good
    completion leaves as exactly length / beat bytes beats"): a first beat only after the
    previous completion's last, and its ``last`` exactly on beat ``length / 16``, whatever
    the host sends (packets that end early or run long, unknown tags, back-pressure). From
    any state of the table with the completion path idle (state START, nothing in the check
    register or on ``cpl_o``): the table's entries, counters and timer start anywhere."""
    h, dut, regs = _frozen_table(mutant)
    m = h.m
    h.assume(~h.rst)        # a reset cuts a packet short by design
    h.assume(~h.first | ((regs["state"] == 0) & ~regs["cpl_held_valid"] & ~dut.cpl_o.valid))
    co = dut.cpl_o.payload
    in_packet = Signal(name="cpl_out_in_packet")
    beat = Signal(range(SMALL["max_payload"] // (1 << GRANULE_BITS) + 1), name="cpl_out_beat")
    units = Signal.like(beat, name="cpl_out_units")
    this_units = Mux(co.first, co.hdr.length[GRANULE_BITS:], units)
    this_beat = Mux(co.first, 0, beat)
    sent = dut.cpl_o.valid & dut.cpl_o.ready
    with m.If(sent):
        m.d.sync += [in_packet.eq(~co.last), beat.eq(this_beat + 1), units.eq(this_units)]
    h.assume(~h.first | ~in_packet)
    h.check("first_after_last", co.first == ~in_packet, guard=dut.cpl_o.valid)
    h.check("last_on_length", co.last == (this_beat + 1 == this_units), guard=dut.cpl_o.valid)
    h.notes.append(f"PcieReadTable({SMALL}); every input free, no reset after the first cycle; first "
                   "state any with the completion path idle")
    return h


TIMEOUT_MAX = 8     # the completion timeouts the property covers: 1 .. 8 cycles (P = 1 or 2)


def timeout_expiry(mutant=None, params=None):
    """The completion timeout against docs/pcie.md: with ``timeout`` = T (constant, 1 ..
    ``TIMEOUT_MAX``), a read is reported (``timeout_count`` + 1, ``timeout_tag``) only
    while it is outstanding and more than T cycles after its request, and never accepts a
    completion whose check comes more than 5·P cycles (P = ⌈T / 4⌉) after its request;
    ``outstanding`` counts what the record holds, reports included."""
    h, dut, params = _table(mutant, params)
    m = h.m
    # (the port stays free and is assumed constant, as completion_accounting assumes it 0:
    # the table's netlist is then the same in both harnesses, which make mutate relies on)
    limit = h.any_const(range(TIMEOUT_MAX + 1), "timeout_T")
    h.assume((limit >= 1) & (limit <= TIMEOUT_MAX) & (dut.timeout == limit))
    period = (limit + 3) >> 2
    cap = 5 * ((TIMEOUT_MAX + 3) // 4) + 3
    rec = _reads_record(h, dut, params, age_cap=cap)
    now = ~h.rst
    # age = cycles since the request was taken on req_i (req_o shows it one cycle later);
    # the report comes one cycle after the entry expired: expired more than T after it
    reported_age = Signal(range(cap + 1), name="reported_rec_age")
    reported_held = Signal(name="reported_rec_outstanding")
    m.d.comb += [reported_age.eq(0), reported_held.eq(0)]
    for t in range(rec.n):
        with m.If(dut.timeout_tag == t):
            m.d.comb += [reported_age.eq(rec.table["age"][t]), reported_held.eq(rec.held[t])]
    h.check("reported_while_outstanding", reported_held, guard=now & rec.timed_out)
    h.check("reported_after_timeout", reported_age > limit + 1, guard=now & rec.timed_out)
    # a completion leaving cpl_o was checked one cycle before: at most 5·P after the request
    h.check("cpl_before_expiry", rec.c_age <= 5 * period + 1, guard=now & rec.new_cpl)
    h.check("cpl_outstanding", rec.c_held & (rec.c_tag < rec.n), guard=now & rec.new_cpl)
    h.check("outstanding_as_record", dut.outstanding == _popcount(rec.held_next), guard=now)
    h.notes.append(f"PcieReadTable({params}); timeout constant in 1..{TIMEOUT_MAX}; requests as the "
                   "SXP sends them; completions free")
    return h


PROPERTIES += [
    *with_mutant(Property("pcie_rdtable", "table_bookkeeping", table_bookkeeping, depth=2, induction=1,
                          params=SMALL,
                          doc="outstanding equals the number of valid entries in every state (4 entries, "
                              "everything free)"),
                 "free_and_expiry_one", "a completion's free and an expiry in one cycle count as one"),
    *with_mutant(Property("pcie_rdtable", "timeout_tick_period", timeout_tick_period, depth=2, induction=1,
                          params=SMALL,
                          doc="with timeout T (any 32-bit constant) the timeout tick comes P + 1 cycles "
                              "after reset, then every P = ceil(T/4) cycles; none with T = 0"),
                 "period_low_bits", "the period arithmetic keeps only the low 16 bits of the timeout"),
    *with_mutants(Property("pcie_rdtable", "entry_ageing", entry_ageing, depth=2, induction=1, params=SMALL,
                           doc="a valid entry's age starts at 0, counts ticks up to 5 and stays there until "
                               "the entry is reported and freed as the lowest expired; no completion for "
                               "an expired entry (4 entries, everything free)"),
                  ("expire_early", "an entry expires after 4 ticks (possibly before T cycles)"),
                  ("ages_kept", "an allocation does not clear the tag's age (a reused tag inherits it)")),
    *with_mutant(Property("pcie_rdtable", "completion_framing", completion_framing, depth=8, params=SMALL,
                          depth_reason="8 steps from an idle completion path: a completion of 8 beats "
                                       "whose first beat is taken in step 0 and checked in step 1, that "
                                       "ends early on its 4th beat (step 4, 5 beats still owed), and the "
                                       "first beat of the next completion on cpl_o in step 6; any shorter "
                                       "or longer packet ends sooner",
                          doc="every completion leaves cpl_o with first after the previous last and "
                              "last exactly on length / 16 beats (4 entries, from an idle completion path)"),
                 "short_unpadded", "a completion that ends early leaves short, not padded with zero beats"),
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
    *with_mutants(Property("pcie_rdtable", "completion_routing", completion_routing, depth=14,
                           params=SMALL, fast=False,
                           depth_reason="14 steps: the reset and the 4-cycle row scrub, two reads "
                                        "allocated back to back (req_o in steps 6 and 7), completions "
                                        "of 1 and 2 beats for each on cpl_i from step 7, on cpl_o two "
                                        "cycles later: interleaved tags and a split read's second part",
                           doc="a completion leaves with the tile, key context and aes of its tag's "
                               "request, at the address that read expects next, each beat with its "
                               "own data (4 entries, beats labelled by address)"),
                  ("tile_from_header", "the completion goes to the tile its untrusted header names"),
                  ("stale_data", "a later beat of a completion leaves with the data of the beat before")),
    *with_mutants(Property("pcie_rdtable", "timeout_expiry", timeout_expiry, depth=20,
                           params=SMALL, fast=False,
                           depth_reason=f"20 steps: the reset and the 4-cycle row scrub, a request taken "
                                        f"in step 5, 5 ticks of P <= 2 cycles (T <= {TIMEOUT_MAX}): expiry "
                                        "by step 17, its report by step 18, and a completion checked in "
                                        "the cycle after expiry leaving in step 19",
                           doc="with timeout T (1..8) a read is reported only while outstanding and more "
                               "than T cycles after its request; no completion is accepted more than "
                               "5*ceil(T/4) cycles after it"),
                  ("expire_early", "an entry expires after 4 ticks (possibly before T cycles)"),
                  ("ages_kept", "an allocation does not clear the tag's age (a reused tag inherits it)")),
]
