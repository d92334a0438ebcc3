"""``Front``: the BCU's front pipeline, from a warp request to micro-ops for the RCaches.

Stage F (combinational on the ``req`` port and ``req_slot``, into register U) decodes the
pointer types, checks the request's kernel slot and the RBT stores, forms the lane group
of this micro-op and reduces the group's lanes pairwise. The group is, in this order:
every active lane when the slot does not exist or is not active (cause 3, no lookup); the
lanes with a bad type (any active lane of invalid type or of a type other than ``base``'s:
cause 5, no lookup); for a store, the lanes whose bytes touch the RBT block of an active
slot (cause 6, no lookup, whatever the pointer type); for Type 2, the pending lanes whose
encrypted id equals that of the lowest pending lane (one RCache lookup); otherwise every
active lane. A warp whose lanes carry several ids leaves as one micro-op per id on
consecutive cycles while the request waits on the port (``req.ready`` rises with the last
one), so no lane is checked against another lane's bounds and no request register is
needed.

RBT protection: each slot's RBT is aligned to its 256 KiB size (the driver allocates it
so), so a lane touches it when address bits 47..18 of its first byte equal those of the
slot's ``rbt_base``, or, for an access that crosses a 256 KiB boundary, those of its last
byte — i.e. its first byte's bits equal the base's minus one. Both block numbers are
registered per slot (the base follows its port one cycle late; a launch takes effect from
the next cycle as well, so the check never sees a half-programmed base): per lane and slot
the check is two 30-bit equalities, shallower than the id match beside it.

Stages after U each merge four spans into one (16 → 4 → 1 for 32 lanes) and run one
decryption round of the group's id; the output (combinational on the last register)
checks Type 3 against the aligned block of ``base`` and runs decryption round 1. Round 0
and the RBT address run in the engine, in the cycles before a miss needs them, so misses
cost no more cycles for the cipher. Each round uses its micro-op's slot's key: the 16-bit
round key is selected (a 4:1 mux on the slot) one stage before the round and travels in
the register with the micro-op, so a round's path starts at a register as before.

Depths (gate levels, register to register): F ≈ 20 (lowest-lane id by a priority mux
tree, id match, pairwise min/max; the RBT check's equalities and its OR over lanes run
beside the id match), a 4-way merge ≈ 19 (six comparisons in parallel, a one-hot pick), a
round ≈ 18, the Type 3 check ≈ 20.
"""
from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import decrement, wire

from .cipher import decrypt_round
from .layout import (
    ID_BITS,
    KEY_BITS,
    MAX_SLOTS,
    RBT_ALIGN_BITS,
    SLOT_BITS,
    TAG_BITS,
    VA_BITS,
    Cause,
    PtrType,
    check_lanes,
    check_slots,
    req_layout,
    span_layout,
    uop_layout,
)
from .pipe import pointer_kind, reduce_spans, stage

__all__ = ["Front", "front_registers"]

_ROUNDS_IN_FRONT = (3, 2)   # one per register after U; round 1 at the output
_ROUND_AT_OUTPUT = 1
_BLOCK_BITS = VA_BITS - RBT_ALIGN_BITS      # an address's 256 KiB block number


def _merge_levels(lanes):
    spans, levels = (lanes + 1) // 2, 0
    while spans > 1:
        spans, levels = (spans + 3) // 4, levels + 1
    return levels


def front_registers(lanes):
    """Registers between the ``req`` port and the front's output: U plus one per 4-way
    merge level, at least one per decryption round run in the front."""
    return 1 + max(len(_ROUNDS_IN_FRONT), _merge_levels(check_lanes(lanes)))


def _round_after(i):
    # the decryption round run after the advance into register i + 1 (in the next
    # advance, or at the output)
    return _ROUNDS_IN_FRONT[i + 1] if i + 1 < len(_ROUNDS_IN_FRONT) else _ROUND_AT_OUTPUT


def _meta_layout():
    return data.StructLayout({
        "lookup": 1,        # Type 2 with active lanes and no cause found in F
        "cause": Cause,     # found in F (no lookup): 3 inactive slot, 5 type, 6 RBT store
        "t3": 1,            # Type 3 with active lanes and no cause found in F: check the block
        "t3_base": VA_BITS,
        "t3_log2": 6,
        "slot": SLOT_BITS,
        "eid": ID_BITS,
        "dec_part": ID_BITS,    # the id, decryption rounds done so far
        "round_key": 16,        # the slot's key of the next round to run (selected a stage early)
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
    slots : int
        Kernel slots (1..4).

    ``req_slot`` is the slot of the request on ``req`` (held with it). Per slot *s*:
    ``id_key[s]``, ``rbt_base[s]``, ``launch[s]`` (its pulse: micro-ops of slot *s* in
    flight become stale) and ``active[s]`` (a kernel runs there; the owner's register).
    """

    def __init__(self, lanes=32, slots=MAX_SLOTS):
        self.lanes = check_lanes(lanes)
        self.slots = check_slots(slots)
        self._span = span_layout(lanes)
        super().__init__({
            "req": In(stream.Signature(req_layout(lanes))),
            "req_slot": In(SLOT_BITS),
            "o": Out(stream.Signature(uop_layout(lanes))),
            "id_key": In(data.ArrayLayout(KEY_BITS, slots)),
            "rbt_base": In(data.ArrayLayout(VA_BITS, slots)),
            "launch": In(slots),
            "active": In(slots),
        })

    def _round_key(self, m, slot, r, name):
        """Round *r*'s 16-bit key of *slot* (0 for a slot that does not exist)."""
        keys = [self.id_key[s][16 * r:16 * r + 16] for s in range(self.slots)]
        keys += [Const(0, 16)] * ((1 << SLOT_BITS) - self.slots)
        return wire(m, Array(keys)[slot], name)

    @staticmethod
    def _key_for(round_key, r):
        # a 64-bit key whose round-r slice is *round_key* (decrypt_round reads only that)
        return Cat(*(round_key if i == r else Const(0, 16) for i in range(KEY_BITS // 16)))

    def _slot_bit(self, vector, slot):
        """Bit *slot* of a per-slot vector, 0 for a slot that does not exist."""
        return Cat(vector, Const(0, (1 << SLOT_BITS) - self.slots)).bit_select(slot, 1)

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
            # accepted before its slot's launch: no fill after it (the slot the register
            # holds after this edge: the incoming micro-op's if it loads)
            held_slot = wire(m, Mux(st[3], payload.meta.slot, st[1].meta.slot), f"front{i}_slot")
            with m.If(self._slot_bit(self.launch, held_slot)):
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
        slot_ok = wire(m, self._slot_bit(self.active, self.req_slot), "slot_ok")
        into_rbt = self._rbt_lanes(m, va, wire(m, active & Cat(req.store for _ in range(n)), "store_lanes"),
                                   req.size_log2)
        rbt_err = wire(m, into_rbt.any(), "rbt_err")

        busy = Signal()          # a multi-id warp is being issued
        pending = Signal(n)      # its lanes not issued yet
        cur = wire(m, Mux(busy, pending, active), "cur")
        leader = _lowest_lane_id(m, cur, eid)
        match = wire(m, Cat(cur[k] & (eid[k] == leader) for k in range(n)), "match")
        # a group found without ids (inactive slot, bad types, RBT stores: one micro-op), so
        # the id match passes two muxes as before the slots, not four
        special = wire(m, ~slot_ok | type_err | rbt_err, "special")
        special_group = wire(m, Mux(~slot_ok, active, Mux(type_err, bad, into_rbt)), "special_group")
        last = wire(m, special | ~is_t2 | _same_id(m, cur, eid), "last")
        group = wire(m, Mux(special, special_group, Mux(is_t2, match, active)), "group")

        issue = wire(m, self.req.valid & accept, "issue")
        m.d.comb += self.req.ready.eq(accept & last)
        with m.If(issue):
            m.d.sync += [busy.eq(~last), pending.eq(cur & ~match)]

        payload = Signal(self._stage_layout((n + 1) // 2), name="front_in")
        meta = payload.meta
        any_active = wire(m, active.any(), "any_active")
        # the cause known here (no lookup); a warp with no active lane passes on any slot
        f_cause = wire(m, Mux(~any_active, Cause.NONE.value,
                              Mux(~slot_ok, Cause.KERNEL.value,
                                  Mux(type_err, Cause.POINTER_TYPE.value,
                                      Mux(rbt_err, Cause.RBT_STORE.value, Cause.NONE.value)))), "f_cause")
        checked = wire(m, any_active & slot_ok & ~type_err & ~rbt_err, "checked")
        m.d.comb += [
            meta.lookup.eq(checked & is_t2),
            meta.cause.eq(f_cause),
            meta.t3.eq(checked & (base_kind == T3)),
            meta.t3_base.eq(req.base.addr),
            meta.t3_log2.eq(req.base.meta.t3.log2_size),
            meta.slot.eq(self.req_slot),
            meta.eid.eq(leader),
            meta.dec_part.eq(leader),
            meta.round_key.eq(self._round_key(m, self.req_slot, _ROUNDS_IN_FRONT[0], "round_key_f")),
            meta.size_log2.eq(req.size_log2),
            meta.store.eq(req.store),
            meta.tag.eq(req.tag),
            meta.last.eq(last),
        ]
        for j in range((n + 1) // 2):
            m.d.comb += payload.spans[j].eq(_pair_span(m, va, group, j, self._span))
        return self.req.valid, payload

    def _rbt_lanes(self, m, va, stores, size_log2):
        """The lanes of *stores* whose bytes touch the RBT block of an active slot."""
        n = len(va)
        first_blk, prev_blk = [], []      # per slot, registered (see the module docstring)
        for s in range(self.slots):
            blk = Signal(_BLOCK_BITS, name=f"rbt_blk{s}")
            # blk - 1 with a borrow bit on top: never equals a block number when blk = 0
            blk_m1 = Signal(_BLOCK_BITS + 1, name=f"rbt_blk{s}_m1")
            on = self.active[s]     # a register of the owner, set by launch like blk
            hi = self.rbt_base[s][RBT_ALIGN_BITS:]
            m.d.sync += [blk.eq(hi), blk_m1.eq(decrement(m, Cat(hi, Const(0, 1)), f"rbt_dec{s}"))]
            first_blk.append((on, blk))
            prev_blk.append((on, blk_m1))
        # the last byte of a lane is in the next block iff its offset in the block is
        # above 2**18 - bytes: offset bits 17..3 all ones and bits 2..0 + bytes - 1 >= 8
        span = wire(m, ((Const(1, 4) << size_log2) - 1)[:3], "rbt_span")
        hits = []
        for k in range(n):
            a = va[k]
            cross = wire(m, a[3:RBT_ALIGN_BITS].all() & (Cat(a[:3], Const(0, 1)) + span)[3], f"rbt_cross{k}")
            blk_k = a[RBT_ALIGN_BITS:]
            terms = [on & (blk_k == blk) for on, blk in first_blk]
            terms += [on & cross & (Cat(blk_k, Const(0, 1)) == blk_m1) for on, blk_m1 in prev_blk]
            hits.append(stores[k] & Cat(*terms).any())
        return wire(m, Cat(*hits), "into_rbt")

    # ------------------------------------------------------------------ merge stages
    def _advance(self, m, reg, i):
        """The next register's input: four spans merged into one, one decryption round."""
        spans = [reg.spans[j] for j in range(len(reg.spans))]
        if len(spans) > 1:
            spans = reduce_spans(m, spans, self._span, f"merge{i}")
        nxt = Signal(self._stage_layout(len(spans)), name=f"front{i + 1}_in")
        m.d.comb += nxt.meta.eq(reg.meta)
        if i < len(_ROUNDS_IN_FRONT):
            r = _ROUNDS_IN_FRONT[i]
            m.d.comb += [
                nxt.meta.dec_part.eq(decrypt_round(m, reg.meta.dec_part, self._key_for(reg.meta.round_key, r),
                                                   r, f"dec{i}")),
                nxt.meta.round_key.eq(self._round_key(m, reg.meta.slot, _round_after(i), f"round_key{i}")),
            ]
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
        # The last byte is not added up: it leaves the block exactly when adding bytes - 1
        # to hi carries into bit log2_size (hi's bits 3..log2_size-1 all ones and its low
        # three bits + bytes - 1 >= 8, or the like for blocks under 8 bytes). With lo in the
        # block (hi >= lo), "the last byte's block is base's" is then "hi's block is base's
        # and no carry", which needs no adder before the compare (bcu_csr measured 25 levels
        # through the adder and the lane mux below).
        s, bva = meta.t3_log2, meta.t3_base
        above = wire(m, Cat(Const(i, 6) >= s for i in range(VA_BITS)), "t3_above")
        less = wire(m, (Const(1, 4) << meta.size_log2) - 1, "t3_less")       # bytes - 1, 0..7
        low = wire(m, hi[:3] + less[:3], "t3_low")                             # 0..14
        small = [less[:3] != 0,                                                # log2_size 0..3
                 (hi[:1] + less[:3])[1:].any(), (hi[:2] + less[:3])[2:].any(), low[3]]
        ones = wire(m, Cat(hi[i] | above[i] for i in range(3, VA_BITS)).all(), "t3_ones")
        carry = wire(m, Mux(s < 4, Array(small)[s[:2]], low[3] & ones & (s <= VA_BITS)), "t3_carry")
        lo_ok = wire(m, ((lo ^ bva) & above) == 0, "t3_lo_ok")
        hi_ok = wire(m, (((hi ^ bva) & above) == 0) & ~carry, "t3_hi_ok")
        t3_fail = wire(m, meta.t3 & ~(lo_ok & hi_ok), "t3_fail")
        log_hi = t3_fail & lo_ok       # a Type 3 overflow at the top logs the top lane
        m.d.comb += [
            out.lookup.eq(meta.lookup),
            out.cause.eq(Mux(meta.cause.as_value() != 0, meta.cause,
                             Mux(t3_fail, Cause.OUT_OF_BOUNDS.value, Cause.NONE.value))),
            out.lo.eq(Mux(log_hi, hi, lo)),
            out.lane_lo.eq(Mux(log_hi, span.lane_hi, span.lane_lo)),
            out.hi.eq(hi),
            out.lane_hi.eq(span.lane_hi),
            out.size_log2.eq(meta.size_log2),
            out.store.eq(meta.store),
            out.tag.eq(meta.tag),
            out.last.eq(meta.last),
            out.slot.eq(meta.slot),
            out.eid.eq(meta.eid),
            out.dec_part.eq(decrypt_round(m, meta.dec_part, self._key_for(meta.round_key, _ROUND_AT_OUTPUT),
                                          _ROUND_AT_OUTPUT, "dec_out")),
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
