"""``Engine``: the BCU's RCache lookup — the one blocking stage of the pipeline.

One micro-op at a time, in order (register E). A micro-op without a lookup, or whose
encrypted id hits the 4-entry L1 RCache, leaves in the cycle it entered (one per cycle);
an L1 miss compares the 64 L2 tags in the next cycle (reading the hit word from the
64-word memory) and leaves the cycle after (3 cycles); an L2 miss fetches
``rbt_base + 16 id`` over ``mem_req``/``mem_resp`` and leaves the cycle after the answer
(4 cycles + the memory turnaround), filling L2 (FIFO) and L1 (tree pseudo-LRU, an invalid
way first) as it leaves.

Reset scrub: the L1 RCache, the L2 tags and valid bits are registers with resets; the L2
entries are a memory, which a walk zeroes after reset, one entry per cycle
(:data:`L2_ENTRIES` cycles, ``scrubbing`` high meanwhile: the BCU refuses requests), so no
cached bound of the last kernel survives a reset. The L2 read port's data register re-reads
entry 0 (zeroed in the walk's first cycle) meanwhile, so it lets go of the last entry read.

The RCaches are tagged with the encrypted id (a bijection of the id under the launch key,
and a launch flushes both), so the cipher is off the hit path. The id still has to be
decrypted for a fetch: the front ran rounds 3..1, round 0 runs in the micro-op's first
cycle here and the RBT address adder in its second, so the address is ready when the
``mem_req`` state comes — the same cycle count as a combinational cipher would give.
"""
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.common import add, increment, wire

from .cipher import decrypt_round
from .layout import (
    COUNTER_BITS,
    ID_BITS,
    KERNEL_ID_BITS,
    KEY_BITS,
    VA_BITS,
    cache_entry_layout,
    check_lanes,
    check_layout,
    mem_req_layout,
    mem_resp_layout,
    rbt_entry_layout,
    uop_layout,
)

__all__ = ["Engine", "L1_ENTRIES", "L2_ENTRIES", "L1_INTERVAL", "L2_INTERVAL", "MISS_INTERVAL"]

L1_ENTRIES = 4
L2_ENTRIES = 64
# Cycles a micro-op holds the engine (the issue interval of back-to-back micro-ops):
L1_INTERVAL = 1      # no lookup, or an L1 hit
L2_INTERVAL = 3      # an L2 hit
MISS_INTERVAL = 4    # a miss: MISS_INTERVAL + (mem_req transfer to mem_resp transfer)


class _State(enum.Enum, shape=3):
    LOOKUP = 0      # E's first cycle: L1 lookup (or a micro-op that needs none)
    L2_TAG = 1      # compare the L2 tags; read the hit word
    L2_DATA = 2     # leave with the L2 word
    FETCH_REQ = 3   # mem_req valid
    FETCH_WAIT = 4  # waiting for mem_resp
    FETCHED = 5     # leave with the fetched entry; fill L2 and L1


def _or_tree(values):
    values = list(values)
    while len(values) > 1:
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def _encode(m, onehot, width, name):
    # Index of the set bit of a one-hot vector (0 when none is set).
    return wire(m, Cat(_or_tree([onehot[i] for i in range(len(onehot)) if i >> b & 1] or [Const(0)])
                       for b in range(width)), name)


class Engine(wiring.Component):
    """Micro-ops in (``uop_layout``), micro-ops with their RCache entry out
    (``check_layout``), in order; RBT fetches on ``mem_req``/``mem_resp``.

    ``l1_hits``, ``l2_hits``, ``misses`` count lookups since reset (wrapping); ``launch``
    flushes both RCaches, and a micro-op accepted before it does not fill them.
    ``scrubbing`` is high for the :data:`L2_ENTRIES` cycles after reset in which the L2
    entries are zeroed (the owner must send nothing meanwhile; the BCU refuses requests).
    """

    def __init__(self, lanes=32):
        self.lanes = check_lanes(lanes)
        super().__init__({
            "i": In(stream.Signature(uop_layout(lanes))),
            "o": Out(stream.Signature(check_layout(lanes))),
            "mem_req": Out(stream.Signature(mem_req_layout)),
            "mem_resp": In(stream.Signature(mem_resp_layout)),
            "rbt_base": In(VA_BITS),
            "kernel_id": In(KERNEL_ID_BITS),
            "id_key": In(KEY_BITS),
            "launch": In(1),
            "l1_hits": Out(COUNTER_BITS),
            "l2_hits": Out(COUNTER_BITS),
            "misses": Out(COUNTER_BITS),
            "scrubbing": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        op = Signal(uop_layout(self.lanes), name="e_op")
        valid = Signal(name="e_valid")
        state = Signal(_State)
        complete = wire(m, self.o.valid & self.o.ready, "e_complete")
        m.d.comb += self.i.ready.eq(~valid | complete)
        with m.If(self.i.ready):
            m.d.sync += [valid.eq(self.i.valid), op.eq(self.i.payload)]
        with m.If(self.launch):
            m.d.sync += op.stale.eq(1)

        l1 = self._l1(m, op.eid)
        m.submodules.l2_data = l2_mem = Memory(shape=cache_entry_layout, depth=L2_ENTRIES, init=[])
        l2 = self._l2(m, op.eid, l2_mem.read_port(), l2_mem.write_port())
        fetched = self._miss(m, op, state, wire(m, valid & op.lookup & ~l1.hit, "l1_miss"),
                             l2.hit, complete)

        at = {s: wire(m, state == s, f"in_{s.name.lower()}") for s in _State}
        entry = Mux(at[_State.L2_DATA], l2.rd.data.as_value(),
                    Mux(at[_State.FETCHED], fetched.as_value(), l1.entry))
        m.d.comb += [
            l2.rd.en.eq(at[_State.L2_TAG] | self.scrubbing),    # (scrubbing: entry 0, see top)
            self.o.valid.eq(valid & ((at[_State.LOOKUP] & (~op.lookup | l1.hit)) |
                                     at[_State.L2_DATA] | at[_State.FETCHED])),
            self.o.payload.entry.eq(entry),
        ]
        for name in ("lookup", "cause", "lo", "lane_lo", "hi", "lane_hi", "size_log2", "store",
                     "tag", "last"):
            m.d.comb += getattr(self.o.payload, name).eq(getattr(op, name))

        from_l1 = wire(m, complete & at[_State.LOOKUP] & op.lookup, "from_l1")
        refill = at[_State.L2_DATA] | at[_State.FETCHED]
        self._fill(m, l1, l2, op.eid, wire(m, complete & ~op.stale & refill, "fill_l1"),
                   wire(m, complete & ~op.stale & at[_State.FETCHED], "fill_l2"), from_l1,
                   Mux(at[_State.FETCHED], fetched.as_value(), l2.rd.data.as_value()), fetched)
        for port, event in ((self.l1_hits, from_l1),
                            (self.l2_hits, complete & at[_State.L2_DATA]),
                            (self.misses, complete & at[_State.FETCHED])):
            count = Signal(COUNTER_BITS, name=f"{port.name}_count")
            with m.If(event):
                m.d.sync += count.eq(increment(m, count, f"{port.name}_inc"))
            m.d.comb += port.eq(count)
        return m

    # ------------------------------------------------------------------ L1
    def _l1(self, m, eid):
        """4-way fully associative L1: registers, the hit vector and the hit entry."""
        l1 = SimpleNamespace(
            valid=Signal(L1_ENTRIES, name="l1_valid"),
            tag=[Signal(ID_BITS, name=f"l1_tag{w}") for w in range(L1_ENTRIES)],
            data=[Signal(cache_entry_layout, name=f"l1_data{w}") for w in range(L1_ENTRIES)],
            plru=Signal(3, name="l1_plru"),  # [0]: 1 = victim in ways 2-3; [1]: way 1 of 0-1; [2]: way 3 of 2-3
        )
        l1.hitv = wire(m, Cat(l1.valid[w] & (l1.tag[w] == eid) for w in range(L1_ENTRIES)),
                       "l1_hitv")
        l1.hit = wire(m, l1.hitv.any(), "l1_hit")
        l1.way = _encode(m, l1.hitv, 2, "l1_way")
        l1.entry = wire(m, _or_tree([Mux(l1.hitv[w], l1.data[w].as_value(), 0)
                                     for w in range(L1_ENTRIES)]), "l1_entry")
        return l1

    # ------------------------------------------------------------------ L2
    def _l2(self, m, eid, rd, wr):
        """64-entry fully associative L2: tags and valid bits in registers, entries in a
        memory read one cycle after the tag compare."""
        l2 = SimpleNamespace(valid=Signal(L2_ENTRIES, name="l2_valid"),
                             tag=[Signal(ID_BITS, name=f"l2_tag{i}") for i in range(L2_ENTRIES)],
                             ptr=Signal(range(L2_ENTRIES), name="l2_ptr"), rd=rd, wr=wr)
        l2.hitv = wire(m, Cat(l2.valid[i] & (l2.tag[i] == eid) for i in range(L2_ENTRIES)),
                       "l2_hitv")
        l2.hit = wire(m, l2.hitv.any(), "l2_hit")
        m.d.comb += rd.addr.eq(_encode(m, l2.hitv, 6, "l2_idx"))
        return l2

    # ------------------------------------------------------------------ fills
    def _fill(self, m, l1, l2, eid, fill_l1, fill_l2, l1_used, new_entry, fetched):
        """Fills as a refilled micro-op leaves (L1 from L2 or memory, L2 from memory), the
        pseudo-LRU update on every L1 use, and the flush at a launch."""
        # Victim: the lowest invalid way, else the pseudo-LRU way.
        inv, plru = ~l1.valid, l1.plru
        plru_way = Mux(plru[0], Cat(plru[2], 1), Cat(plru[1], 0))
        victim = wire(m, Mux(inv[0], 0, Mux(inv[1], 1, Mux(inv[2], 2, Mux(inv[3], 3, plru_way)))),
                      "victim")
        touch = Mux(fill_l1, victim, l1.way)
        with m.If(l1_used | fill_l1):
            # point the tree away from the way just used
            m.d.sync += plru[0].eq(~touch[1])
            with m.If(touch[1]):
                m.d.sync += plru[2].eq(~touch[0])
            with m.Else():
                m.d.sync += plru[1].eq(~touch[0])
        with m.If(fill_l1):
            for w in range(L1_ENTRIES):
                with m.If(victim == w):
                    m.d.sync += [l1.valid[w].eq(1), l1.tag[w].eq(eid), l1.data[w].eq(new_entry)]
        # the reset scrub owns the write port while it runs (no micro-op is in E then)
        scrubbing = Signal(init=1, name="l2_scrubbing")
        scrub_ptr = Signal(range(L2_ENTRIES), name="l2_scrub_ptr")
        with m.If(scrubbing):
            m.d.sync += scrub_ptr.eq(increment(m, scrub_ptr, "l2_scrub_inc"))
            with m.If(scrub_ptr == L2_ENTRIES - 1):
                m.d.sync += scrubbing.eq(0)
        m.d.comb += [l2.wr.en.eq(fill_l2 | scrubbing),
                     l2.wr.addr.eq(Mux(scrubbing, scrub_ptr, l2.ptr)),
                     l2.wr.data.eq(Mux(scrubbing, 0, fetched.as_value())),
                     self.scrubbing.eq(scrubbing)]
        self._scrubbing = scrubbing
        with m.If(fill_l2):
            m.d.sync += [l2.valid.bit_select(l2.ptr, 1).eq(1), l2.ptr.eq(l2.ptr + 1)]
            for i in range(L2_ENTRIES):
                with m.If(l2.ptr == i):
                    m.d.sync += l2.tag[i].eq(eid)
        with m.If(self.launch):
            m.d.sync += [l1.valid.eq(0), l2.valid.eq(0), l2.ptr.eq(0), plru.eq(0)]

    # ------------------------------------------------------------------ miss path
    def _miss(self, m, op, state, l1_miss, l2_hit, complete):
        """The state machine of a lookup and the RBT fetch; returns the fetched entry."""
        fetched = Signal(cache_entry_layout, name="fetched")
        # Decryption round 0 in every cycle on E's micro-op, and the RBT address from it in
        # the next: both are ready, for the micro-op in E, from its L2_TAG / FETCH_REQ cycle.
        dec = Signal(ID_BITS, name="dec_id")
        mem_addr = Signal(VA_BITS, name="mem_addr")
        m.d.sync += [dec.eq(decrypt_round(m, op.dec_part, self.id_key, 0, "dec_e")),
                     mem_addr.eq(add(m, self.rbt_base, Cat(Const(0, 4), dec), VA_BITS, "rbt_addr"))]
        m.d.comb += [
            self.mem_req.valid.eq(state == _State.FETCH_REQ),
            self.mem_req.payload.addr.eq(mem_addr),
            self.mem_resp.ready.eq(state == _State.FETCH_WAIT),
        ]
        rbt = data.View(rbt_entry_layout, self.mem_resp.payload.data)
        with m.Switch(state):
            with m.Case(_State.LOOKUP):
                with m.If(l1_miss):
                    m.d.sync += state.eq(_State.L2_TAG)
            with m.Case(_State.L2_TAG):
                m.d.sync += state.eq(Mux(l2_hit, _State.L2_DATA, _State.FETCH_REQ))
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
        return fetched
