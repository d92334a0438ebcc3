"""``BCU``: the GPUShield Bounds-Checking Unit (DESIGN.md § bcu; decisions in docs/gpushield.md).

Two stages and a small miss engine, one warp request in flight in the back end:

*Front* (combinational on the ``req`` port, registered into S1): decodes the pointer type
of ``base`` and of every lane, forms the lane *group* to check, and reduces the group's
lane addresses to ``[min, max]`` (with the lanes they came from) in a min/max tree. The
group is, in this order: the lanes with a bad type (any active lane of invalid type or of
a type other than ``base``'s: cause 5, no lookup); for Type 2, the pending lanes whose
*encrypted* id equals that of the lowest pending lane (one RCache lookup); otherwise every
active lane. Type 1 passes; Type 3 is checked here against the aligned block of ``base``.
A warp whose active lanes carry several ids is split into one micro-op per id, issued on
consecutive cycles while the request waits on the port (``req.ready`` rises with the
last one), so no lane is ever checked against another lane's bounds and no 2 kbit request
register is needed.

*S1 / back end*: a Type 2 micro-op looks its encrypted id up in the 4-entry L1 RCache (the
RCaches are tagged with the encrypted id — a bijection of the id under the launch key, and
both caches are flushed when the key changes — so decryption is off the hit path). An L1
hit answers in the cycle after the request; a miss goes to the 64-entry fully associative
L2 (tags compared in cycle 2, data read from a 64-word memory, answer in cycle 3); an L2
miss decrypts the id (one cycle, :mod:`.cipher`), fetches ``rbt_base + 16 id`` over
``mem_req``/``mem_resp`` and fills L2 and L1. The comparator checks the group's
``[min, max + bytes)`` against ``[entry.base, entry.base + entry.size)``.

Replacement: L1 tree pseudo-LRU (3 bits; an invalid way first), L2 FIFO (a 6-bit fill
pointer). Counters count Type 2 lookups (one per micro-op). Responses leave in request
order; a warp of several micro-ops reports the cause of its first failing group.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .cipher import decrypt_id
from .layout import (CACHE_ENTRY, COUNTER_BITS, ID_BITS, KERNEL_ID_BITS, KEY_BITS, MEM_REQ,
                     MEM_RESP, RBT_ENTRY, RESP, VA_BITS, Cause, PtrType, check_lanes,
                     lane_bits, log_layout, req_layout)

__all__ = ["BCU", "L1_ENTRIES", "L2_ENTRIES", "L1_LATENCY", "L2_LATENCY", "MISS_OVERHEAD"]

L1_ENTRIES = 4
L2_ENTRIES = 64
L1_LATENCY = 1      # cycles from the request transfer to the answer on an L1 hit
L2_LATENCY = 3      # ... on an L2 hit
MISS_OVERHEAD = 4   # ... on a miss: MISS_OVERHEAD + (mem_req transfer to mem_resp transfer)


class _State(enum.Enum, shape=3):
    LOOKUP = 0      # S1 evaluates (L1 lookup, or a micro-op that needs none)
    L2_TAG = 1      # compare the L2 tags; read the hit word
    L2_DATA = 2     # answer from the L2 word
    FETCH_REQ = 3   # mem_req valid
    FETCH_WAIT = 4  # waiting for mem_resp
    FETCHED = 5     # answer from the fetched entry; fill L2 and L1


def _wire(m, value, name):
    # A named net for a value read more than once (see hw/aes/core.py).
    value = Value.cast(value)
    signal = Signal(len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def _or_tree(values):
    values = list(values)
    while len(values) > 1:
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def _encode(m, onehot, width, name):
    # Index of the set bit of a one-hot vector (0 when none is set).
    return _wire(m, Cat(_or_tree([onehot[i] for i in range(len(onehot)) if i >> b & 1] or [Const(0)])
                        for b in range(width)), name)


def _minmax(m, vals, valid, ibits):
    """``(any, min, argmin, max, argmax)`` of the *vals* whose *valid* bit is set; on ties
    the lowest lane. The first level compares each pair once for both min and max."""
    nodes = [(valid[k], vals[k], Const(k, ibits), vals[k], Const(k, ibits)) for k in range(len(vals))]
    level = 0
    while len(nodes) > 1:
        out = []
        for j in range(0, len(nodes) - 1, 2):
            (av, alo, ailo, ahi, aihi), (bv, blo, bilo, bhi, bihi) = nodes[j], nodes[j + 1]
            name = f"mm{level}_{j // 2}"
            if level == 0:
                lt = _wire(m, alo < blo, f"{name}_lt")
                take_a = av & (~bv | lt | (alo == blo))
                take_b = bv & (~av | lt)
            else:
                take_a = av & (~bv | (alo <= blo))
                take_b = bv & (~av | (bhi > ahi))
            take_a = _wire(m, take_a, f"{name}_ta")
            take_b = _wire(m, take_b, f"{name}_tb")
            out.append((_wire(m, av | bv, f"{name}_v"),
                        _wire(m, Mux(take_a, alo, blo), f"{name}_lo"),
                        _wire(m, Mux(take_a, ailo, bilo), f"{name}_ilo"),
                        _wire(m, Mux(take_b, bhi, ahi), f"{name}_hi"),
                        _wire(m, Mux(take_b, bihi, aihi), f"{name}_ihi")))
        if len(nodes) % 2:
            out.append(nodes[-1])
        nodes = out
        level += 1
    return nodes[0]


def _kind(m, ptr, name):
    # The pointer type, with a Type 3 pointer whose reserved bits 61..54 are not zero
    # counted as invalid.
    t = Value.cast(ptr.type)
    bad_t3 = (t == PtrType.T3.value) & (ptr.meta.t3.reserved != 0)
    return _wire(m, Mux(bad_t3, PtrType.INVALID.value, t), name)


class BCU(wiring.Component):
    """GPUShield Bounds-Checking Unit.

    Parameters
    ----------
    lanes : int
        Lanes per warp request (1..64; the contract's 32 by default).

    Attributes
    ----------
    req : In(stream.Signature(req_layout(lanes)))
    resp : Out(stream.Signature(RESP))
    mem_req : Out(stream.Signature(MEM_REQ))
    mem_resp : In(stream.Signature(MEM_RESP))
    rbt_base, kernel_id, id_key, precise, launch : In
        Configuration; ``kernel_id``, ``id_key`` and ``rbt_base`` are set before the
        ``launch`` pulse and kept until the next one.
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

    def __init__(self, lanes=32):
        self.lanes = check_lanes(lanes)
        super().__init__({
            "req": In(stream.Signature(req_layout(lanes))),
            "resp": Out(stream.Signature(RESP)),
            "mem_req": Out(stream.Signature(MEM_REQ)),
            "mem_resp": In(stream.Signature(MEM_RESP)),
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
        lb = lane_bits(lanes)
        self._uop = data.StructLayout({
            "lookup": 1,            # Type 2 group: look its entry up
            "cause": Cause,         # the cause when no lookup is needed
            "eid": ID_BITS,         # encrypted id of the group
            "lo": VA_BITS,          # lowest lane address (or the address to log)
            "hi": VA_BITS,          # highest lane address
            "lane_lo": lb,
            "lane_hi": lb,
            "size_log2": 2,
            "store": 1,
            "tag": 16,
            "last": 1,              # the warp's last micro-op: answer
        })

    @staticmethod
    def storage_bits():
        """``{"l1": bits, "l2": bits}`` of RCache state (tag + valid + entry per way, plus
        the replacement state)."""
        way = ID_BITS + 1 + CACHE_ENTRY.size
        return {"l1": L1_ENTRIES * way + (L1_ENTRIES - 1), "l2": L2_ENTRIES * way + 6}

    def elaborate(self, platform):
        m = Module()
        n, lb = self.lanes, lane_bits(self.lanes)
        req = self.req.payload
        T2, T3, INVALID = PtrType.T2.value, PtrType.T3.value, PtrType.INVALID.value

        # ------------------------------------------------------------------ front
        base_kind = _kind(m, req.base, "base_kind")
        lane = [req.addr[k] for k in range(n)]
        va = [_wire(m, lane[k].addr, f"va{k}") for k in range(n)]
        eid = [_wire(m, lane[k].meta.id, f"eid{k}") for k in range(n)]
        kinds = [_kind(m, lane[k], f"kind{k}") for k in range(n)]
        active = _wire(m, req.mask, "active")
        bad = _wire(m, Cat(active[k] & ((kinds[k] == INVALID) | (kinds[k] != base_kind))
                           for k in range(n)), "bad")
        type_err = _wire(m, bad.any(), "type_err")
        any_active = _wire(m, active.any(), "any_active")
        is_t2 = _wire(m, base_kind == T2, "is_t2")

        # Type 2 grouping: the pending lanes with the lowest pending lane's encrypted id.
        busy = Signal()            # a multi-id warp is being issued
        pending = Signal(n)        # its lanes not issued yet
        cur = _wire(m, Mux(busy, pending, active), "cur")
        first = _wire(m, cur & ~(cur - 1)[:n], "first")
        leader = _wire(m, _or_tree([Mux(first[k], eid[k], 0) for k in range(n)]), "leader")
        match = _wire(m, Cat(cur[k] & (eid[k] == leader) for k in range(n)), "match")
        rest = _wire(m, cur & ~match, "rest")
        group = _wire(m, Mux(type_err, bad, Mux(is_t2, match, active)), "group")
        last = _wire(m, type_err | ~is_t2 | (rest == 0), "last")

        _, lo, lane_lo, hi, lane_hi = _minmax(m, va, group, lb)

        # Type 3: [lo, hi + bytes) inside the aligned block of base: the address bits at
        # and above log2_size of the first and of the last byte equal those of base.
        s = req.base.meta.t3.log2_size
        bva = req.base.addr
        above = _wire(m, Cat(Const(i, 6) >= s for i in range(VA_BITS + 1)), "t3_above")
        last_byte = _wire(m, hi + ((Const(1, 4) << req.size_log2) - 1)[:4], "t3_last")
        t3_lo_ok = _wire(m, ((lo ^ bva) & above[:VA_BITS]) == 0, "t3_lo_ok")
        t3_hi_ok = ((last_byte ^ bva) & above) == 0
        t3_fail = _wire(m, (base_kind == T3) & any_active & ~(t3_lo_ok & t3_hi_ok), "t3_fail")

        is_lookup = _wire(m, ~type_err & is_t2 & any_active, "is_lookup")
        direct_cause = Mux(type_err, Cause.POINTER_TYPE.value,
                           Mux(t3_fail, Cause.OUT_OF_BOUNDS.value, Cause.NONE.value))
        log_hi = ~is_lookup & ~type_err & t3_lo_ok   # a Type 3 overflow at the top

        # ------------------------------------------------------------------ S1
        s1 = Signal(self._uop)
        s1_valid = Signal()
        state = Signal(_State)

        l1_valid = Signal(L1_ENTRIES)
        l1_tag = [Signal(ID_BITS, name=f"l1_tag{w}") for w in range(L1_ENTRIES)]
        l1_data = [Signal(CACHE_ENTRY, name=f"l1_data{w}") for w in range(L1_ENTRIES)]
        plru = Signal(3)   # [0]: 1 = victim in ways 2-3; [1]: way 1 of 0-1; [2]: way 3 of 2-3

        l2_valid = Signal(L2_ENTRIES)
        l2_tag = [Signal(ID_BITS, name=f"l2_tag{i}") for i in range(L2_ENTRIES)]
        l2_ptr = Signal(range(L2_ENTRIES))
        m.submodules.l2_data = l2_mem = Memory(shape=CACHE_ENTRY, depth=L2_ENTRIES, init=[])
        l2_rd = l2_mem.read_port()
        l2_wr = l2_mem.write_port()

        fetched = Signal(CACHE_ENTRY)
        mem_addr = Signal(VA_BITS)
        stale = Signal()   # a launch came while this micro-op was in flight: do not fill

        # L1 lookup (every cycle, on the S1 micro-op)
        l1_hitv = _wire(m, Cat(l1_valid[w] & (l1_tag[w] == s1.eid) for w in range(L1_ENTRIES)),
                        "l1_hitv")
        l1_hit = _wire(m, l1_hitv.any(), "l1_hit")
        l1_way = _encode(m, l1_hitv, 2, "l1_way")
        l1_entry = _wire(m, _or_tree([Mux(l1_hitv[w], l1_data[w].as_value(), 0)
                                      for w in range(L1_ENTRIES)]), "l1_entry")

        # L2 tag compare (used in state L2_TAG)
        l2_hitv = _wire(m, Cat(l2_valid[i] & (l2_tag[i] == s1.eid) for i in range(L2_ENTRIES)),
                        "l2_hitv")
        l2_hit = _wire(m, l2_hitv.any(), "l2_hit")
        l2_idx = _encode(m, l2_hitv, 6, "l2_idx")

        # The entry the comparator sees, by state.
        entry = data.View(CACHE_ENTRY, _wire(m, Mux(state == _State.L2_DATA, l2_rd.data.as_value(),
                                                    Mux(state == _State.FETCHED, fetched.as_value(),
                                                        l1_entry)), "entry"))
        limit = _wire(m, entry.base + entry.size, "limit")
        end = _wire(m, s1.hi + (Const(1, 4) << s1.size_log2)[:4], "end")
        under = _wire(m, s1.lo < entry.base, "under")
        over = end > limit
        l_cause = _wire(m, Mux(~entry.valid, Cause.INVALID_ENTRY.value,
                               Mux(~entry.kernel_ok, Cause.KERNEL.value,
                                   Mux(under | over, Cause.OUT_OF_BOUNDS.value,
                                       Mux(s1.store & entry.read_only, Cause.READ_ONLY.value,
                                           Cause.NONE.value)))), "l_cause")
        cause = _wire(m, Mux(s1.lookup, l_cause, s1.cause), "cause")
        hi_side = s1.lookup & (l_cause == Cause.OUT_OF_BOUNDS.value) & ~under
        this_lane = Mux(hi_side, s1.lane_hi, s1.lane_lo)
        this_addr = Mux(hi_side, s1.hi, s1.lo)

        # First failing group of a multi-id warp.
        acc_cause = Signal(3)
        acc_lane = Signal(lb)
        acc_addr = Signal(VA_BITS)
        use_acc = acc_cause != 0
        final_cause = _wire(m, Mux(use_acc, acc_cause, cause), "final_cause")
        final_lane = Mux(use_acc, acc_lane, this_lane)
        final_addr = Mux(use_acc, acc_addr, this_addr)

        from_l1 = (state == _State.LOOKUP) & s1.lookup
        resolved = _wire(m, s1_valid & (((state == _State.LOOKUP) & (~s1.lookup | l1_hit)) |
                                        (state == _State.L2_DATA) | (state == _State.FETCHED)),
                         "resolved")
        emit = resolved & s1.last
        m.d.comb += [
            self.resp.valid.eq(emit),
            self.resp.payload.tag.eq(s1.tag),
            self.resp.payload.ok.eq(final_cause == 0),
            self.resp.payload.cause.eq(final_cause),
        ]
        complete = _wire(m, resolved & (~s1.last | self.resp.ready), "complete")
        sent = _wire(m, emit & self.resp.ready, "sent")
        failed = _wire(m, sent & (final_cause != 0), "failed")
        m.d.comb += self.exc.eq(self.precise & failed)

        # ------------------------------------------------------------------ issue
        s1_free = _wire(m, ~s1_valid | complete, "s1_free")
        issue = self.req.valid & s1_free
        m.d.comb += self.req.ready.eq(s1_free & last)
        with m.If(issue):
            m.d.sync += [
                s1_valid.eq(1),
                s1.lookup.eq(is_lookup),
                s1.cause.eq(direct_cause),
                s1.eid.eq(leader),
                s1.lo.eq(Mux(log_hi, hi, lo)),
                s1.hi.eq(hi),
                s1.lane_lo.eq(Mux(log_hi, lane_hi, lane_lo)),
                s1.lane_hi.eq(lane_hi),
                s1.size_log2.eq(req.size_log2),
                s1.store.eq(req.store),
                s1.tag.eq(req.tag),
                s1.last.eq(last),
                busy.eq(~last),
                pending.eq(rest),
            ]
        with m.Elif(complete):
            m.d.sync += s1_valid.eq(0)

        with m.If(complete):
            with m.If(s1.last):
                m.d.sync += acc_cause.eq(0)
            with m.Elif(~use_acc & (cause != 0)):
                m.d.sync += [acc_cause.eq(cause), acc_lane.eq(this_lane), acc_addr.eq(this_addr)]

        # ------------------------------------------------------------------ miss engine
        m.d.comb += [
            l2_rd.addr.eq(l2_idx),
            l2_rd.en.eq(state == _State.L2_TAG),
            self.mem_req.valid.eq(state == _State.FETCH_REQ),
            self.mem_req.payload.addr.eq(mem_addr),
            self.mem_resp.ready.eq(state == _State.FETCH_WAIT),
        ]
        rbt = data.View(RBT_ENTRY, self.mem_resp.payload.data)
        dec = decrypt_id(m, s1.eid, self.id_key)
        with m.Switch(state):
            with m.Case(_State.LOOKUP):
                with m.If(s1_valid & s1.lookup & ~l1_hit):
                    m.d.sync += state.eq(_State.L2_TAG)
            with m.Case(_State.L2_TAG):
                with m.If(l2_hit):
                    m.d.sync += state.eq(_State.L2_DATA)
                with m.Else():
                    m.d.sync += [state.eq(_State.FETCH_REQ),
                                 mem_addr.eq(self.rbt_base + Cat(Const(0, 4), dec))]
            with m.Case(_State.FETCH_REQ):
                with m.If(self.mem_req.ready):
                    m.d.sync += state.eq(_State.FETCH_WAIT)
            with m.Case(_State.FETCH_WAIT):
                with m.If(self.mem_resp.valid):
                    m.d.sync += [
                        state.eq(_State.FETCHED),
                        fetched.base.eq(rbt.base),
                        fetched.size.eq(rbt.size),
                        fetched.valid.eq(rbt.valid),
                        fetched.read_only.eq(rbt.read_only),
                        fetched.kernel_ok.eq(rbt.kernel_id == self.kernel_id),
                    ]
            with m.Case(_State.L2_DATA, _State.FETCHED):
                with m.If(complete):
                    m.d.sync += state.eq(_State.LOOKUP)

        # ------------------------------------------------------------------ fills, PLRU
        # Victim: the lowest invalid way, else the pseudo-LRU way.
        inv = ~l1_valid
        plru_way = Mux(plru[0], Cat(plru[2], 1), Cat(plru[1], 0))
        victim = _wire(m, Mux(inv[0], 0, Mux(inv[1], 1, Mux(inv[2], 2, Mux(inv[3], 3, plru_way)))),
                       "victim")
        fill_l1 = _wire(m, complete & ~stale & ((state == _State.L2_DATA) | (state == _State.FETCHED)),
                        "fill_l1")
        fill_l2 = _wire(m, complete & ~stale & (state == _State.FETCHED), "fill_l2")
        touch = Mux(fill_l1, victim, l1_way)
        with m.If((complete & from_l1) | fill_l1):
            # point the tree away from the way just used
            m.d.sync += plru[0].eq(~touch[1])
            with m.If(touch[1]):
                m.d.sync += plru[2].eq(~touch[0])
            with m.Else():
                m.d.sync += plru[1].eq(~touch[0])
        new_entry = Mux(state == _State.FETCHED, fetched.as_value(), l2_rd.data.as_value())
        with m.If(fill_l1):
            for w in range(L1_ENTRIES):
                with m.If(victim == w):
                    m.d.sync += [l1_valid[w].eq(1), l1_tag[w].eq(s1.eid), l1_data[w].eq(new_entry)]
        m.d.comb += [l2_wr.en.eq(fill_l2), l2_wr.addr.eq(l2_ptr), l2_wr.data.eq(fetched)]
        with m.If(fill_l2):
            m.d.sync += [l2_valid.bit_select(l2_ptr, 1).eq(1), l2_ptr.eq(l2_ptr + 1)]
            for i in range(L2_ENTRIES):
                with m.If(l2_ptr == i):
                    m.d.sync += l2_tag[i].eq(s1.eid)

        with m.If(complete):
            m.d.sync += stale.eq(0)

        # ------------------------------------------------------------------ counters, log
        l1_hits, l2_hits, misses = (Signal(COUNTER_BITS, name=nm) for nm in ("l1c", "l2c", "missc"))
        log_first = Signal(log_layout(self.lanes))
        log_count = Signal(COUNTER_BITS)
        with m.If(complete & from_l1):
            m.d.sync += l1_hits.eq(l1_hits + 1)
        with m.If(complete & (state == _State.L2_DATA)):
            m.d.sync += l2_hits.eq(l2_hits + 1)
        with m.If(complete & (state == _State.FETCHED)):
            m.d.sync += misses.eq(misses + 1)
        with m.If(failed):
            with m.If(log_count == 0):
                m.d.sync += [log_first.tag.eq(s1.tag), log_first.cause.eq(final_cause),
                             log_first.lane.eq(final_lane), log_first.addr.eq(final_addr)]
            with m.If(~log_count.all()):
                m.d.sync += log_count.eq(log_count + 1)

        # A launch flushes both RCaches and clears the violation log.
        with m.If(self.launch):
            m.d.sync += [l1_valid.eq(0), l2_valid.eq(0), l2_ptr.eq(0), plru.eq(0),
                         log_count.eq(0), log_first.eq(0)]
            with m.If(s1_valid & ~complete):
                m.d.sync += stale.eq(1)

        m.d.comb += [
            self.log_first.eq(log_first),
            self.log_count.eq(log_count),
            self.l1_hits.eq(l1_hits),
            self.l2_hits.eq(l2_hits),
            self.misses.eq(misses),
        ]
        return m
