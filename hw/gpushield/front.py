"""``Front``: the BCU's front pipeline, from a warp request to micro-ops for the RCaches.

Stage F (combinational on the ``req`` port, into register U) decodes the pointer types,
forms the lane group of this micro-op and reduces the group's lanes pairwise. The group
is, in this order: the lanes with a bad type (any active lane of invalid type or of a type
other than ``base``'s: cause 5, no lookup); for Type 2, the pending lanes whose encrypted
id equals that of the lowest pending lane (one RCache lookup); otherwise every active
lane. A warp whose lanes carry several ids leaves as one micro-op per id on consecutive
cycles while the request waits on the port (``req.ready`` rises with the last one), so no
lane is checked against another lane's bounds and no request register is needed.

Stages after U each merge four spans into one (16 → 4 → 1 for 32 lanes) and run one
decryption round of the group's id; the output (combinational on the last register)
checks Type 3 against the aligned block of ``base`` and runs decryption round 1. Round 0
and the RBT address run in the engine, in the cycles before a miss needs them, so misses
cost no more cycles for the cipher.

Depths (gate levels, register to register): F ≈ 20 (lowest-lane id by a priority mux
tree, id match, pairwise min/max), a 4-way merge ≈ 19 (six comparisons in parallel, a
one-hot pick), a round ≈ 18, the Type 3 check ≈ 20.
"""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import wire

from .cipher import decrypt_round
from .layout import (
    ID_BITS,
    KEY_BITS,
    TAG_BITS,
    VA_BITS,
    Cause,
    PtrType,
    check_lanes,
    req_layout,
    span_layout,
    uop_layout,
)
from .pipe import add_small, pointer_kind, reduce_spans, stage

__all__ = ["Front", "front_registers"]

_ROUNDS_IN_FRONT = (3, 2)   # one per register after U; round 1 at the output


def _merge_levels(lanes):
    spans, levels = (lanes + 1) // 2, 0
    while spans > 1:
        spans, levels = (spans + 3) // 4, levels + 1
    return levels


def front_registers(lanes):
    """Registers between the ``req`` port and the front's output: U plus one per 4-way
    merge level, at least one per decryption round run in the front."""
    return 1 + max(len(_ROUNDS_IN_FRONT), _merge_levels(check_lanes(lanes)))


def _meta_layout():
    return data.StructLayout({
        "lookup": 1,        # Type 2 with active lanes and no type error
        "type_err": 1,      # the group is the badly typed lanes (cause 5)
        "t3": 1,            # Type 3 with active lanes and no type error: check the block
        "t3_base": VA_BITS,
        "t3_log2": 6,
        "eid": ID_BITS,
        "dec_part": ID_BITS,    # the id, decryption rounds done so far
        "size_log2": 2,
        "store": 1,
        "tag": TAG_BITS,
        "last": 1,
        "stale": 1,
    })


class Front(wiring.Component):
    """Request port → one micro-op per lane group (``uop_layout``), in order.

    Parameters
    ----------
    lanes : int
        Lanes per warp request (1..64).
    """

    def __init__(self, lanes=32):
        self.lanes = check_lanes(lanes)
        self._span = span_layout(lanes)
        super().__init__({
            "req": In(stream.Signature(req_layout(lanes))),
            "o": Out(stream.Signature(uop_layout(lanes))),
            "id_key": In(KEY_BITS),
            "launch": In(1),
        })

    def _stage_layout(self, spans):
        return data.StructLayout({"meta": _meta_layout(),
                                  "spans": data.ArrayLayout(self._span, spans)})

    def elaborate(self, platform):
        m = Module()
        stages = []                       # (valid, reg, ready, accept) per register
        accept_u = Signal()
        valid, payload = self._group(m, accept_u)
        for i in range(front_registers(self.lanes)):
            if i:
                valid, payload = stages[-1][0], self._advance(m, stages[-1][1], i - 1)
            st = stage(m, self._stage_layout(len(payload.spans)), valid, payload, f"front{i}")
            with m.If(self.launch):   # accepted before a launch: no fill after it
                m.d.sync += st[1].meta.stale.eq(1)
            if stages:
                m.d.comb += stages[-1][2].eq(st[3])
            stages.append(st)
        m.d.comb += accept_u.eq(stages[0][3])
        last_valid, last, last_ready, _ = stages[-1]
        m.d.comb += [self.o.valid.eq(last_valid), last_ready.eq(self.o.ready)]
        self._output(m, last)
        return m

    # ------------------------------------------------------------------ stage F
    def _group(self, m, accept):
        """Stage F: the lane group of this cycle's micro-op, reduced pairwise; returns the
        U register's input ``(valid, payload)``."""
        n, req = self.lanes, self.req.payload
        T2, T3, INVALID = PtrType.T2.value, PtrType.T3.value, PtrType.INVALID.value
        base_kind = pointer_kind(m, req.base, "base_kind")
        kinds = [pointer_kind(m, req.addr[k], f"kind{k}") for k in range(n)]
        va = [wire(m, req.addr[k].addr, f"va{k}") for k in range(n)]
        eid = [wire(m, req.addr[k].meta.id, f"eid{k}") for k in range(n)]
        active = wire(m, req.mask, "active")
        bad = wire(m, Cat(active[k] & ((kinds[k] == INVALID) | (kinds[k] != base_kind))
                          for k in range(n)), "bad")
        type_err = wire(m, bad.any(), "type_err")
        is_t2 = wire(m, base_kind == T2, "is_t2")

        busy = Signal()          # a multi-id warp is being issued
        pending = Signal(n)      # its lanes not issued yet
        cur = wire(m, Mux(busy, pending, active), "cur")
        leader = _lowest_lane_id(m, cur, eid)
        match = wire(m, Cat(cur[k] & (eid[k] == leader) for k in range(n)), "match")
        last = wire(m, type_err | ~is_t2 | _same_id(m, cur, eid), "last")
        group = wire(m, Mux(type_err, bad, Mux(is_t2, match, active)), "group")

        issue = wire(m, self.req.valid & accept, "issue")
        m.d.comb += self.req.ready.eq(accept & last)
        with m.If(issue):
            m.d.sync += [busy.eq(~last), pending.eq(cur & ~match)]

        payload = Signal(self._stage_layout((n + 1) // 2), name="front_in")
        meta = payload.meta
        any_active = active.any()
        m.d.comb += [
            meta.lookup.eq(~type_err & is_t2 & any_active),
            meta.type_err.eq(type_err),
            meta.t3.eq(~type_err & (base_kind == T3) & any_active),
            meta.t3_base.eq(req.base.addr),
            meta.t3_log2.eq(req.base.meta.t3.log2_size),
            meta.eid.eq(leader),
            meta.dec_part.eq(leader),
            meta.size_log2.eq(req.size_log2),
            meta.store.eq(req.store),
            meta.tag.eq(req.tag),
            meta.last.eq(last),
        ]
        for j in range((n + 1) // 2):
            m.d.comb += payload.spans[j].eq(_pair_span(m, va, group, j, self._span))
        return self.req.valid, payload

    # ------------------------------------------------------------------ merge stages
    def _advance(self, m, reg, i):
        """The next register's input: four spans merged into one, one decryption round."""
        spans = [reg.spans[j] for j in range(len(reg.spans))]
        if len(spans) > 1:
            spans = reduce_spans(m, spans, self._span, f"merge{i}")
        nxt = Signal(self._stage_layout(len(spans)), name=f"front{i + 1}_in")
        m.d.comb += nxt.meta.eq(reg.meta)
        if i < len(_ROUNDS_IN_FRONT):
            m.d.comb += nxt.meta.dec_part.eq(
                decrypt_round(m, reg.meta.dec_part, self.id_key, _ROUNDS_IN_FRONT[i], f"dec{i}"))
        for j, s in enumerate(spans):
            m.d.comb += nxt.spans[j].eq(s)
        return nxt

    # ------------------------------------------------------------------ output
    def _output(self, m, reg):
        """The micro-op: Type 3 checked, decryption round 1 done."""
        meta, span, out = reg.meta, reg.spans[0], self.o.payload
        lo, hi = span.lo, span.hi
        # Type 3: [lo, hi + bytes) inside the aligned block of base: the address bits at
        # and above log2_size of the first and of the last byte equal those of base.
        s, bva = meta.t3_log2, meta.t3_base
        above = wire(m, Cat(Const(i, 6) >= s for i in range(VA_BITS + 1)), "t3_above")
        last_byte = add_small(m, hi, ((Const(1, 4) << meta.size_log2) - 1)[:4], "t3_last")
        lo_ok = wire(m, ((lo ^ bva) & above[:VA_BITS]) == 0, "t3_lo_ok")
        hi_ok = wire(m, ((last_byte ^ bva) & above) == 0, "t3_hi_ok")
        t3_fail = wire(m, meta.t3 & ~(lo_ok & hi_ok), "t3_fail")
        log_hi = t3_fail & lo_ok       # a Type 3 overflow at the top logs the top lane
        m.d.comb += [
            out.lookup.eq(meta.lookup),
            out.cause.eq(Mux(meta.type_err, Cause.POINTER_TYPE.value,
                             Mux(t3_fail, Cause.OUT_OF_BOUNDS.value, Cause.NONE.value))),
            out.lo.eq(Mux(log_hi, hi, lo)),
            out.lane_lo.eq(Mux(log_hi, span.lane_hi, span.lane_lo)),
            out.hi.eq(hi),
            out.lane_hi.eq(span.lane_hi),
            out.size_log2.eq(meta.size_log2),
            out.store.eq(meta.store),
            out.tag.eq(meta.tag),
            out.last.eq(meta.last),
            out.eid.eq(meta.eid),
            out.dec_part.eq(decrypt_round(m, meta.dec_part, self.id_key, 1, "dec_out")),
            out.stale.eq(meta.stale),
        ]


def _lowest_lane_id(m, cur, eid):
    # The id of the lowest lane set in *cur*, by a tree of 2:1 muxes (log2 lanes deep)
    # steered by "the lower half has a lane": shallower than a one-hot AND-OR select.
    nodes = [(cur[k], eid[k]) for k in range(len(eid))]
    level = 0
    while len(nodes) > 1:
        out = []
        for j in range(0, len(nodes) - 1, 2):
            (a_any, a_id), (b_any, b_id) = nodes[j], nodes[j + 1]
            out.append((wire(m, a_any | b_any, f"lead{level}_{j // 2}_any"),
                        wire(m, Mux(a_any, a_id, b_id), f"lead{level}_{j // 2}")))
        if len(nodes) % 2:
            out.append(nodes[-1])
        nodes, level = out, level + 1
    return wire(m, nodes[0][1], "leader")


def _same_id(m, cur, eid):
    # Whether every lane set in *cur* carries the same id (true when none is set): no id
    # bit is both 1 in one such lane and 0 in another. Independent of the leader, so
    # req.ready does not wait for the id match.
    n = len(eid)
    split = []
    for b in range(ID_BITS):
        ones = wire(m, Cat(eid[k][b] for k in range(n)), f"id_bit{b}")   # bit b of every lane
        split.append((cur & ones).any() & (cur & ~ones).any())
    return wire(m, ~Cat(*split).any(), "same_id")


def _pair_span(m, va, valid, j, layout):
    """Lanes 2j and 2j+1 (those set in *valid*) as a span; ties to the lower lane."""
    a, b = 2 * j, 2 * j + 1
    span = Signal(layout, name=f"pair{j}")
    if b >= len(va):
        m.d.comb += [span.any.eq(valid[a]), span.lo.eq(va[a]), span.lane_lo.eq(a),
                     span.hi.eq(va[a]), span.lane_hi.eq(a)]
        return span
    le = wire(m, va[a] <= va[b], f"pair{j}_le")
    lt = wire(m, va[a] < va[b], f"pair{j}_lt")
    lo_a = wire(m, valid[a] & (~valid[b] | le), f"pair{j}_lo_a")
    hi_b = wire(m, valid[b] & (~valid[a] | lt), f"pair{j}_hi_b")
    m.d.comb += [
        span.any.eq(valid[a] | valid[b]),
        span.lo.eq(Mux(lo_a, va[a], va[b])),
        span.lane_lo.eq(Mux(lo_a, a, b)),
        span.hi.eq(Mux(hi_b, va[b], va[a])),
        span.lane_hi.eq(Mux(hi_b, b, a)),
    ]
    return span
