"""``PcieReadTable``: the PCIe-complex read lookup table (docs/pcie.md).

Between the SXP and the host. A read request (``req_i``) gets the lowest free PCIe tag and
leaves its tile, ``key_index`` and ``aes`` plus the next expected address and the bytes
still expected in the tag's entry; it goes on to the host (``req_o``) with the tag. Each
completion from the untrusted host (``cpl_i``) is checked against its tag's entry on its
first beat and either forwarded to the tiles (``cpl_o``) with a trusted header — tile,
``key_index``, ``aes`` from the table, ``cc`` on the completion that finishes the read — or
dropped whole and counted. docs/pcie.md is the user's reference; in brief:

Table state, per tag ``t`` < ``entries``, addresses and byte counts in granules of one
beat (16 · ``lanes`` bytes):

- ``valid[t]`` (flip-flops with reset: a reset frees every tag);
- ``static[t]`` = {tile, key_index, aes}: a memory written by the request;
- ``dynamic[t]`` = {next, left}: the next expected address and the granules still
  expected; a memory written by the request and by each completion (two write ports,
  never the same row in one cycle, see below);
- ``age[t]``: completion-timeout ticks seen while outstanding (0 .. 5, saturating), kept
  as three bit-plane vectors.

Pipeline (every path within 24 gate levels, docs/pcie.md § Timing):

- request: the lowest free tag is searched in the cycle ``req_i`` is accepted; the request
  and its tag go into the ``req_o`` register, its ``valid`` bit is set at that edge, and
  its memory rows are written in the next cycle from the ``req_o`` register (a write
  address from a register instead of from the search: the search and the row decoder do
  not add up on one path);
- completion: a beat accepted on ``cpl_i`` waits one cycle in the check register
  (``held``); there the entry is read (asynchronously, with the registered tag), checked
  and written back, so the next beat — even the first beat of a completion of the same
  tag, in the next cycle — reads the updated entry: no bubble and no forwarding. The check
  treats the tag allocated in the cycle before as unknown (its rows are being written):
  a completion checked in the cycle after it was accepted thus sees exactly the reads
  allocated before the cycle it was accepted in, as without the check register (one that
  waits in the register under back-pressure sees the table as it is when it leaves).
  ``cpl_o`` is registered: 2 cycles from ``cpl_i``.

Completion checks on the first beat (the lowest-numbered failing one is the cause,
:class:`~hw.pcie.layout.Cause`): tag not live (>= ``entries``, free, timed out) →
UNKNOWN_TAG; length > bytes left → OVERRUN; address ≠ next expected (which includes an
address that is not a multiple of the beat) → ADDRESS; length 0, not a multiple of the
beat or > ``max_payload`` → MALFORMED; not the last completion of the read and not ending
on the RCB → BOUNDARY. A bad completion is consumed up to its ``last`` beat and nothing of
it leaves; ``err_count`` counts it, ``err_tag``/``err_cause`` latch it; the entry is
unchanged (the read stays outstanding until it completes or times out).

Framing: packet boundaries come from ``cpl_i.last`` alone (``first`` is ignored); the
header of later beats is ignored. A good completion leaves as exactly ``length / beat
bytes`` beats: surplus input beats are dropped, a packet that ends early is padded with
zero beats (the check register waits meanwhile); either counts a FRAMING error.

Completion timeout: with ``timeout`` = T > 0 the tick counter hits every P = ceil(T / 4)
cycles, counting with the T of the cycle before (registered as P - 1), and the tick
reaches the ages one cycle after the hit (registers that keep the input port's arithmetic,
the counter compare and the age update in three cycles); each tick ages every live entry; an entry
whose age reaches 5 ticks (> T cycles after its request) is expired: completions for it
are UNKNOWN_TAG, and the lowest expired tag is freed, counted in ``timeout_count`` and
latched in ``timeout_tag``, one per cycle.
"""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.common import increment
from hw.sxp.packet import Header, Kind, beat_layout

from .layout import (
    COUNTER_BITS,
    TAG_BITS,
    TIMEOUT_BITS,
    TIMEOUT_STEPS,
    Cause,
    check_params,
    dynamic_layout,
    static_layout,
)

__all__ = ["PcieReadTable", "AGE_EXPIRED"]

AGE_EXPIRED = TIMEOUT_STEPS + 1     # ticks after which an outstanding read has timed out
_COUNT_MAX = (1 << COUNTER_BITS) - 1


class _State(enum.Enum, shape=2):
    START = 0   # the held beat is the first of a packet
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

    A binary tree of (any, index) pairs: a node's index is its low child's with a 0 on top
    if the low child has a set bit, else its high child's with a 1 on top — one MUX2 level
    per tree level, the selects (ORs of the low halves) ready just in time: about log2(n)
    levels. The one-hot decodes the index. (A parallel-prefix OR with an OR-tree encoder,
    or ``bits & -bits``, is as shallow on paper, but Yosys/ABC map both to 33 levels at
    256 bits; this tree maps to 15 including the decoder.)"""
    n = len(bits)
    nodes = [(bits[i], None) for i in range(n)]
    level = 0
    while len(nodes) > 1:
        parents = []
        for k in range(0, len(nodes) - 1, 2):
            (any_lo, idx_lo), (any_hi, idx_hi) = nodes[k], nodes[k + 1]
            index = ~any_lo if idx_lo is None else Cat(Mux(any_lo, idx_lo, idx_hi), ~any_lo)
            parents.append((_wire(m, any_lo | any_hi, f"{name}_any{level}_{k // 2}"),
                            _wire(m, index, f"{name}_index{level}_{k // 2}")))
        if len(nodes) % 2:    # an unpaired last node: the low half of its parent
            any_lo, idx_lo = nodes[-1]
            parents.append((any_lo, Const(0, 1) if idx_lo is None else Cat(idx_lo, Const(0, 1))))
        nodes, level = parents, level + 1
    any_set, index = nodes[0]
    index = _wire(m, index, f"{name}_index")
    onehot = _wire(m, Mux(any_set, (Const(1, n) << index)[:n], 0), f"{name}_onehot")
    return _wire(m, any_set, f"{name}_any"), onehot, index


def _sat_inc(counter):
    return Mux(counter == _COUNT_MAX, counter, counter + 1)


def _step_count(count, up, down1, down2, *, one_down=False):
    """``count + up - down1 - down2`` as a choice among precomputed neighbours: the 1-bit
    events arrive late in the cycle, the increments and decrements do not wait for them.
    (*one_down*: a test-only seeded bug, two simultaneous decrements count as one.)"""
    down = Mux(down1 | down2, 1, 0) if one_down else Mux(down1 & down2, 2, Mux(down1 | down2, 1, 0))
    minus = Mux(down == 2, count - 2, Mux(down == 1, count - 1, count))
    plus = Mux(down == 2, count - 1, Mux(down == 1, count, count + 1))
    return Mux(up, plus, minus)


class PcieReadTable(wiring.Component):
    """The PCIe-complex read lookup table.

    Parameters (:func:`hw.pcie.layout.check_params`)
    ----------
    entries : int
        Outstanding reads (PCIe tags 0 .. entries - 1), 2 .. 256; default 256.
    rcb : int
        Read-completion boundary in bytes, 64 or 128, a multiple of 16 · lanes; default 64.
    max_payload : int
        Max payload size of a completion, 128 or 256; default 256.
    max_read : int
        Max read request size, 128 .. 1024 (power of two); default 1024.
    lanes : int
        Beat width in 128-bit lanes (1, 2, 4); default 1. Requests must have address and
        length multiples of 16 · lanes bytes.

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

    def __init__(self, entries=256, rcb=64, max_payload=256, max_read=1024, lanes=1, *,
                 _formal_mutant=None):
        self.params = check_params(entries, rcb, max_payload, max_read, lanes)
        # test-only seeded bugs (formal/pcie.py; never set in a design): "counters_wrap" drops
        # the counters' saturation; "accept_free" takes a completion for a free tag,
        # "cc_every" sets cc on every completion (the first of a split read too),
        # "free_early" frees the tag on every completion, "left_off_by_one" writes back one
        # granule too few still expected, "uncounted_unknown" drops a completion for an
        # unknown tag without counting it; "tile_from_header" routes a completion to the tile its
        # (untrusted) header names; "stale_data" forwards each later beat with the data of the
        # beat before; "expire_early" expires an entry after 4 ticks; "ages_kept" does not
        # clear a tag's age when it is allocated again; "free_and_expiry_one" counts a
        # completion's free and an expiry in the same cycle as one tag off ``outstanding``;
        # "period_low_bits" keeps the timeout's period arithmetic to its low 16 bits;
        # "short_unpadded" lets a completion that ends early leave short (no zero beats)
        if _formal_mutant not in (None, "counters_wrap", "accept_free", "cc_every", "free_early",
                                  "left_off_by_one", "uncounted_unknown", "tile_from_header",
                                  "stale_data", "expire_early", "ages_kept", "free_and_expiry_one",
                                  "period_low_bits", "short_unpadded"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
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
        self.req_latency = 1   # req_i → req_o, cycles, output ready
        self.scrub_cycles = self.params.entries   # req_i refused after reset: rows zeroed
        self.cpl_latency = 2   # cpl_i → cpl_o (the check register, then the output register)

    def _count_up(self, counter):
        return counter + 1 if self._formal_mutant == "counters_wrap" else _sat_inc(counter)

    # ---- requests ------------------------------------------------------------------
    def _requests(self, m, t):
        """Lowest free tag, the req_o register, and the entry write one cycle later."""
        p = self.params
        free_any, free_oh, free_idx = _lowest(m, ~t.valid, "free")
        t.req_take = _wire(m, self.req_i.valid & self.req_i.ready, "req_take")
        m.d.comb += self.req_i.ready.eq(free_any & (~self.req_o.valid | self.req_o.ready) &
                                        ~t.scrubbing)
        t.alloc_oh = _wire(m, Mux(t.req_take, free_oh, 0), "alloc_oh")
        # req_o.valid low at the edge means the register is free; each load is one allocation
        req_hdr = Signal(Header, name="req_hdr")    # reset: the last request's address
        m.d.sync += self.req_o.valid.eq(t.req_take | (self.req_o.valid & ~self.req_o.ready))
        with m.If(t.req_take):
            m.d.sync += [req_hdr.eq(self.req_i.payload.hdr), req_hdr.tag.eq(free_idx)]
        # a read request carries no data: req_o.data is 0 (no flip-flops)
        m.d.comb += [self.req_o.payload.hdr.eq(req_hdr),
                     self.req_o.payload.first.eq(1), self.req_o.payload.last.eq(1)]
        # the rows of the tag allocated in the cycle before ("fresh") are written now
        t.fresh = Signal(name="alloc_fresh")
        m.d.sync += t.fresh.eq(t.req_take)
        t.fresh_tag = req_hdr.tag
        gb = p.granule_bits
        # while the reset scrub runs (no request is taken) it owns these write ports
        scrub, row = t.scrubbing, t.scrub_row
        m.d.comb += [
            t.st_w.addr.eq(Mux(scrub, row, req_hdr.tag)), t.st_w.en.eq(t.fresh | scrub),
            t.st_w.data.tile.eq(Mux(scrub, 0, req_hdr.tile)),
            t.st_w.data.key_index.eq(Mux(scrub, 0, req_hdr.key_index)),
            t.st_w.data.aes.eq(req_hdr.aes & ~scrub),
            t.dy_alloc.addr.eq(Mux(scrub, row, req_hdr.tag)), t.dy_alloc.en.eq(t.fresh | scrub),
            t.dy_alloc.data.next.eq(Mux(scrub, 0, req_hdr.addr[gb:])),
            t.dy_alloc.data.left.eq(Mux(scrub, 0, req_hdr.length[gb:])),
        ]

    # ---- completions: check register, lookup, checks -------------------------------
    def _checks(self, m, t):
        """The held first beat against its entry: ``t.bad``, ``t.cause``, ``t.finish``."""
        p = self.params
        n, aw, gb = p.entries, p.addr_bits, p.granule_bits
        hdr = t.held.hdr
        tag = _wire(m, hdr.tag, "cpl_tag")
        t.tag, t.idx = tag, tag[:aw]
        m.d.comb += [t.st_r.addr.eq(t.idx), t.dy_r.addr.eq(t.idx)]
        pad = (1 << aw) - n
        live_p = Cat(t.live, Const(0, pad)) if pad else t.live
        known = live_p.bit_select(t.idx, 1) & ~(t.fresh & (tag == t.fresh_tag))
        if self._formal_mutant == "accept_free":
            known = ~(t.fresh & (tag == t.fresh_tag))
        if n < (1 << TAG_BITS):
            known = known & (tag < n)
        known = _wire(m, known, "cpl_known")
        t.entry_next = _wire(m, t.dy_r.data.next, "entry_next")
        t.entry_left = _wire(m, t.dy_r.data.left, "entry_left")
        length = _wire(m, hdr.length, "cpl_length")
        t.units = _wire(m, length[gb:], "cpl_units")
        left_bytes = Cat(Const(0, gb), t.entry_left)
        t.finish = _wire(m, length == left_bytes, "cpl_finish")
        c_over = length > left_bytes
        c_addr = (hdr.addr[gb:] != t.entry_next) | (hdr.addr[:gb] != 0)
        rcb_bits = (p.rcb >> gb).bit_length() - 1
        if rcb_bits:
            end_low = (t.entry_next[:rcb_bits] + t.units[:rcb_bits])[:rcb_bits]
            c_bound = ~t.finish & (end_low != 0)
        else:               # the RCB is one beat: every completion ends on it
            c_bound = Const(0)
        checks = [(~known, Cause.UNKNOWN_TAG), (c_over, Cause.OVERRUN), (c_addr, Cause.ADDRESS),
                  (t.malformed, Cause.MALFORMED), (c_bound, Cause.BOUNDARY)]
        checks = [(_wire(m, c, f"c_{cause.name.lower()}"), cause) for c, cause in checks]
        t.bad = _wire(m, Cat(c for c, _ in checks).any(), "cpl_bad")
        cause = Const(Cause.NONE.value, 3)
        for c, cs in reversed(checks):
            cause = Mux(c, cs.value, cause)
        t.cause = cause

    def _check_register(self, m, t):
        """cpl_i → ``held``: the beat the checks and the state machine see next cycle."""
        p = self.params
        t.held = Signal(beat_layout(p.lanes), name="cpl_held")     # reset: address, tile
        t.held_valid = Signal(name="cpl_held_valid")
        # from the header alone, computed as the beat enters: the malformed check, and the
        # entry's next address if the beat is a good first beat (address + length)
        t.malformed = Signal(name="cpl_malformed", reset_less=True)
        t.end = Signal(Header["addr"].width - p.granule_bits, name="cpl_end")
        t.advance = _wire(m, ~self.cpl_o.valid | self.cpl_o.ready, "advance")
        t.held_ready = _wire(m, Mux(t.state == _State.DROP, 1,
                                    Mux(t.state == _State.PAD, 0, t.advance)), "held_ready")
        t.held_take = _wire(m, t.held_valid & t.held_ready, "held_take")
        m.d.comb += self.cpl_i.ready.eq(~t.held_valid | t.held_ready)
        length, gb = self.cpl_i.payload.hdr.length, p.granule_bits
        with m.If(self.cpl_i.valid & self.cpl_i.ready):
            m.d.sync += [t.held.eq(self.cpl_i.payload), t.held_valid.eq(1),
                         t.end.eq(self.cpl_i.payload.hdr.addr[gb:] + length[gb:]),
                         t.malformed.eq((length == 0) | (length[:p.granule_bits] != 0) |
                                        (length > p.max_payload))]
        with m.Elif(t.held_take):
            m.d.sync += t.held_valid.eq(0)

    # ---- completion state machine ----------------------------------------------------
    def _packets(self, m, t):
        """Forward, pad or drop the held beats; the cpl_o register; error events."""
        p = self.params
        beat, take = t.held, t.held_take
        left = Signal(range(p.beats(p.max_payload)), name="beats_left")   # after this one
        out = Signal(beat_layout(p.lanes), name="cpl_q")   # cpl_o payload (reset: as held)
        new_hdr = Signal(Header, name="cpl_hdr")
        m.d.comb += [
            new_hdr.kind.eq(Kind.READ_CPL),
            new_hdr.tile.eq(beat.hdr.tile if self._formal_mutant == "tile_from_header" else t.st_r.data.tile),
            new_hdr.addr.eq(beat.hdr.addr), new_hdr.length.eq(beat.hdr.length),
            new_hdr.aes.eq(t.st_r.data.aes), new_hdr.cc.eq(Const(1) if self._formal_mutant == "cc_every" else t.finish),
            new_hdr.key_index.eq(t.st_r.data.key_index), new_hdr.tag.eq(t.tag),
        ]
        emit, emit_first, emit_last = Signal(name="emit"), Signal(name="emit_first"), Signal(name="emit_last")
        emit_hdr = Signal(Header, name="emit_hdr")
        emit_data = Signal(len(beat.data), name="emit_data")
        t.err_ev, t.ev_cause = Signal(name="err_ev"), Signal(Cause, name="ev_cause")
        t.ev_tag = Signal(TAG_BITS, name="ev_tag")
        t.cpl_write = Signal(name="cpl_write")   # a good first beat: update its entry
        m.d.comb += [emit_hdr.eq(out.hdr), emit_data.eq(beat.data)]
        beats = t.units          # a granule is one beat

        def event(cause, tag):
            m.d.comb += [t.err_ev.eq(1), t.ev_cause.eq(cause), t.ev_tag.eq(tag)]

        def goto(state):
            m.d.sync += t.state.eq(state)

        with m.Switch(t.state):
            with m.Case(_State.START):
                with m.If(take & t.bad):
                    if self._formal_mutant == "uncounted_unknown":
                        with m.If(t.cause != Cause.UNKNOWN_TAG.value):
                            event(t.cause, t.tag)
                    else:
                        event(t.cause, t.tag)
                    with m.If(~beat.last):
                        goto(_State.DROP)
                with m.Elif(take):
                    m.d.comb += [emit.eq(1), emit_hdr.eq(new_hdr), emit_first.eq(1),
                                 emit_last.eq(beats == 1), t.cpl_write.eq(1)]
                    m.d.sync += left.eq(beats - 1)
                    with m.If((beats == 1) & ~beat.last):
                        event(Cause.FRAMING, t.tag)
                        goto(_State.DROP)
                    with m.Elif((beats != 1) & beat.last):
                        event(Cause.FRAMING, t.tag)
                        goto(_State.PAD)
                    with m.Elif(beats != 1):
                        goto(_State.FWD)
            with m.Case(_State.FWD):
                with m.If(take):
                    m.d.comb += [emit.eq(1), emit_last.eq(left == 1)]
                    if self._formal_mutant == "stale_data":
                        m.d.comb += emit_data.eq(out.data)
                    m.d.sync += left.eq(left - 1)
                    with m.If((left == 1) & beat.last):
                        goto(_State.START)
                    with m.Elif((left == 1) | beat.last):
                        event(Cause.FRAMING, out.hdr.tag)
                        short = _State.START if self._formal_mutant == "short_unpadded" else _State.PAD
                        goto(Mux(left == 1, _State.DROP, short))
            with m.Case(_State.PAD):
                with m.If(t.advance):
                    m.d.comb += [emit.eq(1), emit_data.eq(0), emit_last.eq(left == 1)]
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        goto(_State.START)
            with m.Case(_State.DROP):
                with m.If(take & beat.last):
                    goto(_State.START)

        with m.If(t.advance):
            m.d.sync += self.cpl_o.valid.eq(emit)
        with m.If(emit):
            m.d.sync += [out.hdr.eq(emit_hdr), out.data.eq(emit_data),
                         out.first.eq(emit_first), out.last.eq(emit_last)]
        m.d.comb += self.cpl_o.payload.eq(out)
        with m.If(t.err_ev):
            m.d.sync += [self.err_count.eq(self._count_up(self.err_count)),
                         self.err_tag.eq(t.ev_tag), self.err_cause.eq(t.ev_cause)]

    # ---- reset scrub -----------------------------------------------------------------------
    def _scrub(self, m, t):
        """After reset a walk writes zero to one row of both table memories per cycle
        (``scrub_cycles`` = ``entries`` cycles), ``req_i`` refused meanwhile: no address,
        length, tile or key context of a read from before the reset stays in the table."""
        n = self.params.entries
        t.scrubbing = Signal(init=1, name="scrubbing")
        t.scrub_row = Signal(range(n), name="scrub_row")
        with m.If(t.scrubbing):
            m.d.sync += t.scrub_row.eq(increment(m, t.scrub_row, "scrub_inc"))
            with m.If(t.scrub_row == n - 1):
                m.d.sync += t.scrubbing.eq(0)

    # ---- completion timeout --------------------------------------------------------------
    def _timer(self, m, t):
        """``t.tick``: one cycle after the tick counter hits its period.

        The counter runs on the ``timeout`` of the cycle before (registered as
        ceil(T / 4) - 1 = floor((T - 1) / 4), and T != 0): the input port's arithmetic and
        the counter's compare are in different cycles."""
        shift = TIMEOUT_STEPS.bit_length() - 1
        last_period = Signal(TIMEOUT_BITS, name="tick_last", reset_less=True)  # period - 1
        timer_on = Signal(name="timer_on")
        width = 16 if self._formal_mutant == "period_low_bits" else TIMEOUT_BITS
        m.d.sync += [last_period.eq((self.timeout - 1)[:width] >> shift),
                     timer_on.eq(self.timeout != 0)]
        tcount = Signal(TIMEOUT_BITS, name="tick_count")
        hit = _wire(m, timer_on & (tcount >= last_period), "tick_hit")
        m.d.sync += tcount.eq(Mux(hit | ~timer_on, 0, tcount + 1))
        t.tick = Signal(name="tick")
        m.d.sync += t.tick.eq(hit)

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.entries
        t = type("TableNets", (), {})()     # the nets the helpers share

        # ---- table state ------------------------------------------------------------
        t.valid = valid = Signal(n, name="valid")
        # age of every entry as three bit planes (bit k of all entries in one vector), so
        # that the per-tick increment is a handful of n-bit vector operations
        age = [Signal(n, name=f"age_bit{k}", reset_less=True) for k in range(3)]
        assert AGE_EXPIRED == 0b101
        if self._formal_mutant == "expire_early":
            expired = _wire(m, valid & age[2] & ~age[1] & ~age[0], "expired")
        else:
            expired = _wire(m, valid & age[2] & ~age[1] & age[0], "expired")
        t.live = _wire(m, valid & ~expired, "live")
        m.submodules.static = static = Memory(shape=static_layout(), depth=n, init=[])
        m.submodules.dynamic = dynamic = Memory(shape=dynamic_layout(p), depth=n, init=[])
        t.st_w, t.st_r = static.write_port(), static.read_port(domain="comb")
        # the request writes the row of a tag allocated in the cycle before, which the
        # checks treat as unknown: a completion never writes that row in the same cycle
        t.dy_alloc, dy_cpl = dynamic.write_port(), dynamic.write_port()
        t.dy_r = dynamic.read_port(domain="comb")
        t.state = Signal(_State, name="state")
        self._scrub(m, t)

        self._requests(m, t)
        self._check_register(m, t)
        self._checks(m, t)
        self._packets(m, t)
        self._timer(m, t)

        cpl_free = _wire(m, t.cpl_write if self._formal_mutant == "free_early" else t.cpl_write & t.finish,
                         "cpl_free")
        left_after = t.entry_left - t.units
        if self._formal_mutant == "left_off_by_one":
            left_after = left_after - 1
        m.d.comb += [
            dy_cpl.addr.eq(t.idx), dy_cpl.en.eq(t.cpl_write & ~t.finish),
            dy_cpl.data.next.eq(t.end),      # = entry_next + units: the address matched
            dy_cpl.data.left.eq(left_after),
        ]
        exp_any, exp_oh, exp_idx = _lowest(m, expired, "expiry")
        with m.If(exp_any):
            m.d.sync += [self.timeout_count.eq(self._count_up(self.timeout_count)),
                         self.timeout_tag.eq(exp_idx)]

        # ---- per-entry updates -------------------------------------------------------
        cfree_oh = _wire(m, Mux(cpl_free, (Const(1, n) << t.idx)[:n], 0), "cfree_oh")
        m.d.sync += valid.eq((valid & ~cfree_oh & ~exp_oh) | t.alloc_oh)
        # ages: +1 (a ripple over the three planes) on a tick for live entries; 0 on alloc
        inc = _wire(m, Mux(t.tick, t.live, 0), "age_inc")
        carry1 = inc & age[0]
        carry2 = carry1 & age[1]
        clear = Const(0, n) if self._formal_mutant == "ages_kept" else t.alloc_oh
        m.d.sync += [age[0].eq((age[0] ^ inc) & ~clear),
                     age[1].eq((age[1] ^ carry1) & ~clear),
                     age[2].eq((age[2] ^ carry2) & ~clear)]
        m.d.sync += self.outstanding.eq(_step_count(self.outstanding, t.req_take, cpl_free, exp_any,
                                                             one_down=self._formal_mutant == "free_and_expiry_one"))
        return m
