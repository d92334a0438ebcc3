"""``PcieReadTable``: the PCIe-complex read lookup table (DESIGN.md § pcie_rdtable).

Between the SXP and the host. A read request (``req_i``) gets the lowest free PCIe tag and
leaves its tile, ``key_index`` and ``aes`` plus the next expected address and the bytes
still expected in the tag's entry; it goes on to the host (``req_o``) with the tag. Each
completion from the untrusted host (``cpl_i``) is checked against its tag's entry on its
first beat and either forwarded to the tiles (``cpl_o``) with a trusted header — tile,
``key_index``, ``aes`` from the table, ``cc`` on the completion that finishes the read — or
dropped whole and counted. docs/pcie.md is the user's reference; in brief:

Table state, per tag ``t`` < ``entries``:

- ``valid[t]`` (flip-flops with reset: a reset frees every tag);
- ``static[t]`` = {tile, key_index, aes}: a memory written by the request;
- ``dynamic[t]`` = {next, left}: the next expected address and the bytes still expected,
  both in 16-byte granules; a memory written by the request and by each completion (two
  write ports, never the same row in one cycle: a request takes a free tag, a completion
  updates a live one);
- ``age[t]``: completion-timeout ticks seen while outstanding (0 .. 5, saturating), kept
  as three bit-plane vectors.

Both memories are read asynchronously with the tag of the completion beat at ``cpl_i``, so
the lookup, the checks and the entry update happen in the cycle the first beat is accepted,
and the next completion (even of the same tag, in the next cycle) sees the updated entry:
no bubble between packets. ``req_o`` and ``cpl_o`` are registered (latency 1 cycle each);
``req_i.ready`` and ``cpl_i.ready`` follow the output's ``ready`` combinationally.

Completion checks on the first beat (the lowest-numbered failing one is the cause,
:class:`~hw.pcie.layout.Cause`): tag not live (>= ``entries``, free, or timed out) →
UNKNOWN_TAG; length > bytes left → OVERRUN; address ≠ next expected → ADDRESS; length 0,
not a multiple of 16 or > ``max_payload`` → MALFORMED; not the last completion of the read
and not ending on the RCB → BOUNDARY. A bad completion is consumed up to its ``last`` beat
and nothing of it leaves; ``err_count`` counts it, ``err_tag``/``err_cause`` latch it; the
entry is unchanged (the read stays outstanding until it completes or times out).

Framing: packet boundaries come from ``cpl_i.last`` alone (``first`` is ignored); the
header of later beats is ignored. A good completion leaves as exactly ``ceil(length /
beat bytes)`` beats: surplus input beats are dropped, a packet that ends early is padded
with zero beats (``cpl_i.ready`` low meanwhile); either counts a FRAMING error.

Completion timeout: with ``timeout`` = T > 0 a tick comes every P = ceil(T / 4) cycles;
each tick ages every live entry; an entry whose age reaches 5 ticks (> T cycles after its
request) is expired: completions for it are UNKNOWN_TAG, and the lowest expired tag is
freed, counted in ``timeout_count`` and latched in ``timeout_tag``, one per cycle.
"""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.sxp.packet import Header, Kind, beat_layout

from .layout import (COUNTER_BITS, GRANULE_BITS, TAG_BITS, TIMEOUT_BITS, TIMEOUT_STEPS, Cause,
                     check_params, dynamic_layout, static_layout)

__all__ = ["PcieReadTable", "AGE_EXPIRED"]

AGE_EXPIRED = TIMEOUT_STEPS + 1     # ticks after which an outstanding read has timed out
_COUNT_MAX = (1 << COUNTER_BITS) - 1


class _State(enum.Enum, shape=2):
    START = 0   # the next cpl_i beat is the first of a packet
    FWD = 1     # forwarding the beats of a good completion
    PAD = 2     # the completion ended early: emitting zero beats up to its length
    DROP = 3    # consuming a dropped completion (or surplus beats) up to `last`


def _wire(m, value, name):
    # A named net for a value read more than once (see hw/aes/core.py).
    signal = Signal(len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def _lowest(m, bits, name):
    """``(any, onehot, index)`` of the lowest set bit of *bits*.

    A parallel-prefix OR (log2(n) steps of ``p |= p << k``) gives, for each position, "a
    lower bit is set"; the one-hot keeps the set bit that has none below it; each index bit
    is an OR over the one-hot positions that have it. log2(n) + log2(n) levels, and a few
    n-bit vector expressions instead of a tree of n - 1 named multiplexers: small Verilog,
    quick Verilator builds. (``bits & -bits`` is shorter to write, but Yosys/ABC turn its
    carry into a chain of ~n/2 levels.)"""
    n = len(bits)
    bits = _wire(m, bits, f"{name}_bits")
    prefix, k, step = bits, 1, 0
    while k < n:
        prefix = _wire(m, prefix | (prefix << k)[:n], f"{name}_prefix{step}")
        k, step = 2 * k, step + 1
    onehot = _wire(m, bits & ~(prefix << 1)[:n], f"{name}_onehot")
    width = max(1, (n - 1).bit_length())
    masks = [Const(sum(1 << i for i in range(n) if (i >> b) & 1), n) for b in range(width)]
    index = _wire(m, Cat((onehot & mask).any() for mask in masks), f"{name}_index")
    return _wire(m, bits.any(), f"{name}_any"), onehot, index


def _sat_inc(counter):
    return Mux(counter == _COUNT_MAX, counter, counter + 1)


class PcieReadTable(wiring.Component):
    """The PCIe-complex read lookup table.

    Parameters (:func:`hw.pcie.layout.check_params`)
    ----------
    entries : int
        Outstanding reads (PCIe tags 0 .. entries - 1), 2 .. 256; default 256.
    rcb : int
        Read-completion boundary in bytes, 64 or 128; default 64.
    max_payload : int
        Max payload size of a completion, 128 or 256; default 256.
    max_read : int
        Max read request size, 128 .. 1024 (power of two); default 1024.
    lanes : int
        Beat width in 128-bit lanes (1, 2, 4); default 1.

    Attributes
    ----------
    req_i : In(stream.Signature(beat_layout(lanes)))   read requests from the SXP
    req_o : Out(stream.Signature(beat_layout(lanes)))  the same, tag filled in, to the host
    cpl_i : In(stream.Signature(beat_layout(lanes)))   completions from the host
    cpl_o : Out(stream.Signature(beat_layout(lanes)))  checked completions to the tiles
    timeout : In(32)          completion timeout in cycles, 0 = off
    err_count : Out(32)       dropped or repaired completions (saturating)
    err_tag : Out(8)          tag of the latest one
    err_cause : Out(Cause)    its cause
    timeout_count : Out(32)   reads that timed out (saturating)
    timeout_tag : Out(8)      tag of the latest one
    outstanding : Out(range(entries + 1))  tags in use
    """

    def __init__(self, entries=256, rcb=64, max_payload=256, max_read=1024, lanes=1):
        self.params = check_params(entries, rcb, max_payload, max_read, lanes)
        beat = beat_layout(lanes)
        super().__init__({
            "req_i": In(stream.Signature(beat)),
            "req_o": Out(stream.Signature(beat)),
            "cpl_i": In(stream.Signature(beat)),
            "cpl_o": Out(stream.Signature(beat)),
            "timeout": In(TIMEOUT_BITS),
            "err_count": Out(COUNTER_BITS),
            "err_tag": Out(TAG_BITS),
            "err_cause": Out(Cause),
            "timeout_count": Out(COUNTER_BITS),
            "timeout_tag": Out(TAG_BITS),
            "outstanding": Out(range(entries + 1)),
        })
        self.latency = 1   # req_i → req_o and cpl_i → cpl_o, cycles, output ready

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n, aw = p.entries, p.addr_bits
        beat_lay = beat_layout(p.lanes)

        # ---- table state ------------------------------------------------------------
        valid = Signal(n, name="valid")
        # age of every entry as three bit planes (bit k of all entries in one vector), so
        # that the per-tick increment is a handful of n-bit vector operations
        age = [Signal(n, name=f"age_bit{k}", reset_less=True) for k in range(3)]
        assert AGE_EXPIRED == 0b101
        expired = _wire(m, valid & age[2] & ~age[1] & age[0], "expired")
        live = _wire(m, valid & ~expired, "live")
        m.submodules.static = static = Memory(shape=static_layout(), depth=n, init=[])
        m.submodules.dynamic = dynamic = Memory(shape=dynamic_layout(p), depth=n, init=[])
        st_w, st_r = static.write_port(), static.read_port(domain="comb")
        dy_alloc, dy_cpl = dynamic.write_port(), dynamic.write_port()
        dy_r = dynamic.read_port(domain="comb")

        # ---- requests: lowest free tag, registered output ---------------------------
        free_any, free_oh, free_idx = _lowest(m, ~valid, "free")
        req_take = _wire(m, self.req_i.valid & self.req_i.ready, "req_take")
        m.d.comb += self.req_i.ready.eq(free_any & (~self.req_o.valid | self.req_o.ready))
        rq = self.req_i.payload.hdr
        req_hdr = Signal(Header, name="req_hdr", reset_less=True)
        m.d.sync += self.req_o.valid.eq(req_take | (self.req_o.valid & ~self.req_o.ready))
        with m.If(req_take):
            m.d.sync += [req_hdr.eq(rq), req_hdr.tag.eq(free_idx)]
        # a read request carries no data: req_o.data is 0 (no flip-flops)
        m.d.comb += [self.req_o.payload.hdr.eq(req_hdr),
                     self.req_o.payload.first.eq(1), self.req_o.payload.last.eq(1)]
        m.d.comb += [
            st_w.addr.eq(free_idx), st_w.en.eq(req_take),
            st_w.data.tile.eq(rq.tile), st_w.data.key_index.eq(rq.key_index),
            st_w.data.aes.eq(rq.aes),
            dy_alloc.addr.eq(free_idx), dy_alloc.en.eq(req_take),
            dy_alloc.data.next.eq(rq.addr[GRANULE_BITS:]),
            dy_alloc.data.left.eq(rq.length[GRANULE_BITS:]),
        ]

        # ---- completions: lookup and checks on the first beat ------------------------
        state = Signal(_State, name="state")
        max_beats = p.beats(p.max_payload)
        left = Signal(range(max_beats), name="beats_left")   # beats to emit after this one
        out = Signal(beat_lay, name="cpl_q", reset_less=True)  # the cpl_o payload register
        advance = _wire(m, ~self.cpl_o.valid | self.cpl_o.ready, "advance")
        m.d.comb += self.cpl_i.ready.eq(Mux(state == _State.DROP, 1,
                                            Mux(state == _State.PAD, 0, advance)))
        cpl_take = _wire(m, self.cpl_i.valid & self.cpl_i.ready, "cpl_take")
        beat = self.cpl_i.payload
        hdr = beat.hdr
        tag = _wire(m, hdr.tag, "cpl_tag")
        idx = tag[:aw]
        m.d.comb += [st_r.addr.eq(idx), dy_r.addr.eq(idx)]
        pad = (1 << aw) - n
        live_p = Cat(live, Const(0, pad)) if pad else live
        known = live_p.bit_select(idx, 1)
        if n < (1 << TAG_BITS):
            known = known & (tag < n)
        known = _wire(m, known, "cpl_known")
        entry_next = _wire(m, dy_r.data.next, "entry_next")
        entry_left = _wire(m, dy_r.data.left, "entry_left")
        length = _wire(m, hdr.length, "cpl_length")
        units = length[GRANULE_BITS:]
        left_bytes = Cat(Const(0, GRANULE_BITS), entry_left)
        finish = _wire(m, length == left_bytes, "cpl_finish")
        c_over = length > left_bytes
        c_addr = (hdr.addr[GRANULE_BITS:] != entry_next) | (hdr.addr[:GRANULE_BITS] != 0)
        c_malf = (length == 0) | (length[:GRANULE_BITS] != 0) | (length > p.max_payload)
        rcb_bits = (p.rcb >> GRANULE_BITS).bit_length() - 1
        end_low = (entry_next[:rcb_bits] + units[:rcb_bits])[:rcb_bits]
        c_bound = ~finish & (end_low != 0)
        checks = [(~known, Cause.UNKNOWN_TAG), (c_over, Cause.OVERRUN), (c_addr, Cause.ADDRESS),
                  (c_malf, Cause.MALFORMED), (c_bound, Cause.BOUNDARY)]
        checks = [(_wire(m, c, f"c_{cause.name.lower()}"), cause) for c, cause in checks]
        bad = _wire(m, Cat(c for c, _ in checks).any(), "cpl_bad")
        cause = Const(Cause.NONE.value, 3)
        for c, cs in reversed(checks):
            cause = Mux(c, cs.value, cause)
        lane_bits = p.lanes.bit_length() - 1
        beats = _wire(m, (units + (p.lanes - 1)) >> lane_bits, "cpl_beats")   # of a good one

        new_hdr = Signal(Header, name="cpl_hdr")
        m.d.comb += [
            new_hdr.kind.eq(Kind.READ_CPL),
            new_hdr.tile.eq(st_r.data.tile),
            new_hdr.addr.eq(hdr.addr),
            new_hdr.length.eq(length),
            new_hdr.aes.eq(st_r.data.aes),
            new_hdr.cc.eq(finish),
            new_hdr.key_index.eq(st_r.data.key_index),
            new_hdr.tag.eq(tag),
        ]

        # ---- completion state machine -------------------------------------------------
        emit = Signal(name="emit")
        emit_hdr = Signal(Header, name="emit_hdr")
        emit_data = Signal(len(beat.data), name="emit_data")
        emit_first = Signal(name="emit_first")
        emit_last = Signal(name="emit_last")
        err_ev = Signal(name="err_ev")
        ev_cause = Signal(Cause, name="ev_cause")
        ev_tag = Signal(TAG_BITS, name="ev_tag")
        cpl_write = Signal(name="cpl_write")   # a good first beat: update its entry
        m.d.comb += [emit_hdr.eq(out.hdr), emit_data.eq(beat.data)]

        def framing(tag_value):
            m.d.comb += [err_ev.eq(1), ev_cause.eq(Cause.FRAMING), ev_tag.eq(tag_value)]

        with m.Switch(state):
            with m.Case(_State.START):
                with m.If(cpl_take):
                    with m.If(bad):
                        m.d.comb += [err_ev.eq(1), ev_cause.eq(cause), ev_tag.eq(tag)]
                        with m.If(~beat.last):
                            m.d.sync += state.eq(_State.DROP)
                    with m.Else():
                        m.d.comb += [emit.eq(1), emit_hdr.eq(new_hdr), emit_first.eq(1),
                                     emit_last.eq(beats == 1), cpl_write.eq(1)]
                        m.d.sync += left.eq(beats - 1)
                        with m.If(beats == 1):
                            with m.If(~beat.last):
                                framing(tag)
                                m.d.sync += state.eq(_State.DROP)
                        with m.Elif(beat.last):
                            framing(tag)
                            m.d.sync += state.eq(_State.PAD)
                        with m.Else():
                            m.d.sync += state.eq(_State.FWD)
            with m.Case(_State.FWD):
                with m.If(cpl_take):
                    m.d.comb += [emit.eq(1), emit_last.eq(left == 1)]
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        with m.If(beat.last):
                            m.d.sync += state.eq(_State.START)
                        with m.Else():
                            framing(out.hdr.tag)
                            m.d.sync += state.eq(_State.DROP)
                    with m.Elif(beat.last):
                        framing(out.hdr.tag)
                        m.d.sync += state.eq(_State.PAD)
            with m.Case(_State.PAD):
                with m.If(advance):
                    m.d.comb += [emit.eq(1), emit_data.eq(0), emit_last.eq(left == 1)]
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.d.sync += state.eq(_State.START)
            with m.Case(_State.DROP):
                with m.If(cpl_take & beat.last):
                    m.d.sync += state.eq(_State.START)

        with m.If(advance):
            m.d.sync += self.cpl_o.valid.eq(emit)
        with m.If(emit):
            m.d.sync += [out.hdr.eq(emit_hdr), out.data.eq(emit_data),
                         out.first.eq(emit_first), out.last.eq(emit_last)]
        m.d.comb += self.cpl_o.payload.eq(out)

        cpl_free = _wire(m, cpl_write & finish, "cpl_free")
        m.d.comb += [
            dy_cpl.addr.eq(idx), dy_cpl.en.eq(cpl_write & ~finish),
            dy_cpl.data.next.eq(entry_next + units),
            dy_cpl.data.left.eq(entry_left - units),
        ]
        with m.If(err_ev):
            m.d.sync += [self.err_count.eq(_sat_inc(self.err_count)),
                         self.err_tag.eq(ev_tag), self.err_cause.eq(ev_cause)]

        # ---- completion timeout ------------------------------------------------------
        period = _wire(m, (self.timeout + (TIMEOUT_STEPS - 1)) >> (TIMEOUT_STEPS.bit_length() - 1),
                       "tick_period")
        tcount = Signal(len(period), name="tick_count")
        timer_on = self.timeout != 0
        tick = _wire(m, timer_on & (tcount + 1 >= period), "tick")
        m.d.sync += tcount.eq(Mux(tick | ~timer_on, 0, tcount + 1))
        exp_any, exp_oh, exp_idx = _lowest(m, expired, "expiry")
        with m.If(exp_any):
            m.d.sync += [self.timeout_count.eq(_sat_inc(self.timeout_count)),
                         self.timeout_tag.eq(exp_idx)]

        # ---- per-entry updates -------------------------------------------------------
        alloc_oh = _wire(m, Mux(req_take, free_oh, 0), "alloc_oh")
        cfree_oh = _wire(m, Mux(cpl_free, (Const(1, n) << idx)[:n], 0), "cfree_oh")
        m.d.sync += valid.eq((valid & ~cfree_oh & ~exp_oh) | alloc_oh)
        # ages: +1 (a ripple over the three planes) on a tick for live entries; 0 on alloc
        inc = _wire(m, Mux(tick, live, 0), "age_inc")
        carry1 = inc & age[0]
        carry2 = carry1 & age[1]
        m.d.sync += [age[0].eq((age[0] ^ inc) & ~alloc_oh),
                     age[1].eq((age[1] ^ carry1) & ~alloc_oh),
                     age[2].eq((age[2] ^ carry2) & ~alloc_oh)]

        m.d.sync += self.outstanding.eq(self.outstanding + req_take - cpl_free - exp_any)
        return m
