"""``Engine``: the BCU's RCache lookup, non-blocking (hit under miss), for several kernel slots.

Register E holds one micro-op at a time, in order; every RCache entry is tagged with
(slot, encrypted id), so one kernel never hits another's entry. In E's first cycle the
micro-op's tag is compared with the 4 L1 tags (CAM) and the 64 L2 tags at once:

- no lookup (Type 1 / Type 3 / a type error), or an L1 hit: leaves E that cycle
  (:data:`L1_CYCLES` = 1);
- L1 miss, L2 hit: the hit word is read from the L2 memory in the next cycle, and the
  micro-op leaves with it, copying it into L1 (:data:`L2_CYCLES` = 2: one bubble);
- miss in both (a *primary* miss): the L1 victim way and the L2 FIFO entry are allocated
  at once, marked *pending*, a fetch is issued, and the micro-op leaves E that cycle
  (:data:`MISS_CYCLES` = 1) into the answer queue, where it waits for its RBT entry while
  later micro-ops go on with their lookups;
- a hit on a pending entry (a *secondary* miss) waits in E until that entry is filled,
  then proceeds as a hit (an L1 hit, or an L2 hit with its second cycle).

Because entries are allocated at the miss, every lookup sees the allocation of every
earlier lookup: hits, misses, victims and fetch addresses are exactly those of the
sequential golden model, whatever the memory latency.

*Fetches*: at most :data:`MAX_FETCHES` = 4 outstanding (a miss allocates a slot of a
4-entry fetch ring, freed by the memory's answer; E waits when the ring is full). The fetch
goes through a two-register pipe: F1 takes decryption round 0 of the micro-op's id (computed
from E in E's cycle, with its slot's round key, selected as the micro-op entered E) and its
slot's ``rbt_base``; F2 takes the RBT
address ``rbt_base + 16 id`` (a log-depth adder) and drives ``mem_req`` — :data:`FETCH_DELAY`
= 2 cycles after the miss's E cycle. Memory answers come in order, so the k-th answer is the
k-th fetch's: it fills L2 (memory write) and L1 only if the entry is still pending for that
fetch (each pending L1 way keeps its fetch's ring index, and a fetch for a micro-op made
stale by a launch of its slot allocates nothing), and it completes the micro-op's queue
entry.

*Answer queue* (:data:`QUEUE_DEPTH` = 8 entries, registers): micro-ops leave in order.
A micro-op leaving E with its entry goes straight to the checker when the queue is empty
and the checker takes it (no added cycle), else into the queue; a miss waits there until
its memory answer (the cycle after it). E waits while the queue is full.

Reset scrub: every register resets (E, the L1 RCache, the L2 tags and valid bits, the
queue, the fetch ring and pipe); the L2 entries are a memory, which a walk zeroes after
reset, one entry per cycle (:data:`L2_ENTRIES` cycles, ``scrubbing`` high meanwhile: the BCU
refuses requests), so no cached bound of the last kernel survives a reset. The L2 read
port's data register re-reads entry 0 (zeroed in the walk's first cycle) meanwhile, so it
lets go of the last entry read.

The RCaches are tagged with the encrypted id (a bijection of the id under the slot's
launch key, and a launch of the slot flushes its entries), so the cipher is off the hit
path; the front ran rounds 3..1, round 0 runs here on a miss.
"""
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

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
    check_slots,
    mem_req_layout,
    mem_resp_layout,
    rbt_entry_layout,
    uop_layout,
)
from .pipe import stage

_LOW_BITS = 4 + ID_BITS     # the bits of an RBT address that 16 id reaches

__all__ = ["Engine", "L1_ENTRIES", "L2_ENTRIES", "MAX_FETCHES", "QUEUE_DEPTH", "L1_CYCLES",
           "L2_CYCLES", "MISS_CYCLES", "FETCH_DELAY", "fetch_layout", "MUTANTS"]

L1_ENTRIES = 4
L2_ENTRIES = 64
MAX_FETCHES = 4     # RBT fetches outstanding (issued by E, not yet answered by memory)
QUEUE_DEPTH = 8     # micro-ops between E and the checker
# Cycles a micro-op holds E when nothing makes it wait (the issue interval back to back):
L1_CYCLES = 1       # no lookup, or an L1 hit
L2_CYCLES = 2       # an L2 hit: tags, then the L2 word
MISS_CYCLES = 1     # a primary miss: allocate, issue the fetch, move on into the queue
FETCH_DELAY = 2     # from a miss's E cycle to its mem_req (F1, F2)
# test-only seeded bugs (formal/gpushield.py, never set in a design):
# "no_flush": a launch does not invalidate its slot's L1 ways (a hit after a relaunch);
# "fill_any_pending": a memory answer fills every pending L1 way, not only the way waiting
#   for that fetch (another fetch's, or a previous launch's, RBT word in a way);
# "answer_newest_slot": a memory answer is taken as for the slot of the newest fetch instead
#   of its own (its kernel id compared with another slot's)
MUTANTS = (None, "no_flush", "fill_any_pending", "answer_newest_slot")

# the ring and queue pointers wrap by overflowing: both sizes are powers of two
assert MAX_FETCHES & (MAX_FETCHES - 1) == 0 and QUEUE_DEPTH & (QUEUE_DEPTH - 1) == 0
assert MAX_FETCHES < L2_ENTRIES     # an L2 entry is never reallocated while its fetch is out
_RING_BITS = bits_for(MAX_FETCHES - 1)
_QUEUE_BITS = bits_for(QUEUE_DEPTH - 1)


def fetch_layout(slot_bits):
    """What the fetch pipe's second register (F2, ``fetch2``) holds: the RBT address and
    the tag of the micro-op it fetches for (the formal harness reads the tag)."""
    return data.StructLayout({"addr": VA_BITS, "eid": ID_BITS, "slot": max(1, slot_bits)})


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


def _by_index(m, values, index, name):
    """``values[index]`` by a tree of 2:1 muxes on the index bits (the last value for an
    index past the end)."""
    values = list(values)
    level = 0
    while len(values) > 1:
        values = [Mux(index[level], values[i + 1], values[i]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
        level += 1
    return wire(m, values[0], name)


def _up_down(m, count, up, down):
    """*count* + 1 on *up* alone, - 1 on *down* alone (an occupancy count)."""
    with m.If(up & ~down):
        m.d.sync += count.eq(count + 1)
    with m.Elif(down & ~up):
        m.d.sync += count.eq(count - 1)


class Engine(wiring.Component):
    """Micro-ops in (``uop_layout``), micro-ops with their RCache entry out
    (``check_layout``), in order; RBT fetches on ``mem_req``/``mem_resp``.

    Parameters
    ----------
    lanes : int
        Lanes per warp request (1..64).
    slots : int
        Kernel slots (1..4). Per slot *s*: ``rbt_base[s]``, ``kernel_id[s]``, ``id_key[s]``
        and ``launch[s]`` (its pulse flushes slot *s*'s RCache entries; a micro-op of slot
        *s* accepted before it is answered but fills nothing). The micro-op's ``slot``
        selects its configuration; a slot past the last one must not reach a lookup (the
        front fails it).

    ``l1_hits``, ``l2_hits``, ``misses`` count lookups since reset (wrapping), each the
    cycle after it left E.
    ``scrubbing`` is high for the :data:`L2_ENTRIES` cycles after reset in which the L2
    entries are zeroed (the owner must send nothing meanwhile; the BCU refuses requests).
    """

    def __init__(self, lanes=32, slots=1, *, _formal_mutant=None):
        self.lanes = check_lanes(lanes)
        self.slots = check_slots(slots)
        if _formal_mutant not in MUTANTS:
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        # slot bits in a cache tag: none for one slot
        self._slot_bits = bits_for(slots - 1) if slots > 1 else 0
        super().__init__({
            "i": In(stream.Signature(uop_layout(lanes))),
            "o": Out(stream.Signature(check_layout(lanes))),
            "mem_req": Out(stream.Signature(mem_req_layout)),
            "mem_resp": In(stream.Signature(mem_resp_layout)),
            "rbt_base": In(data.ArrayLayout(VA_BITS, slots)),
            "kernel_id": In(data.ArrayLayout(KERNEL_ID_BITS, slots)),
            "id_key": In(data.ArrayLayout(KEY_BITS, slots)),
            "launch": In(slots),
            "l1_hits": Out(COUNTER_BITS),
            "l2_hits": Out(COUNTER_BITS),
            "misses": Out(COUNTER_BITS),
            "scrubbing": Out(1),
        })

    # ------------------------------------------------------------------ helpers
    def _slot(self, slot):
        """The tag's slot bits of a micro-op's ``slot`` field."""
        return slot[:self._slot_bits]

    def _per_slot(self, m, array, slot, name):
        """``array[slot]`` of a per-slot input or list (a mux tree on the slot bits)."""
        return _by_index(m, [array[s] for s in range(self.slots)], slot, name)

    def _launch_of(self, slot):
        """Whether ``launch`` pulses for *slot* (tag slot bits) this cycle."""
        if self.slots == 1:
            return self.launch[0]
        return Cat(self.launch, Const(0, (1 << self._slot_bits) - self.slots)).bit_select(slot, 1)

    def elaborate(self, platform):
        m = Module()
        lanes, sb = self.lanes, self._slot_bits
        tag_bits = ID_BITS + sb
        op = Signal(uop_layout(lanes), name="e_op")
        valid = Signal(name="e_valid")
        in_l2 = Signal(name="e_l2_data")     # E's second cycle of an L2 hit
        tag = wire(m, Cat(op.eid, self._slot(op.slot)), "e_tag")

        l1 = self._l1(m, tag, tag_bits)
        m.submodules.l2_data = l2_mem = Memory(shape=cache_entry_layout, depth=L2_ENTRIES, init=[])
        l2 = self._l2(m, tag, tag_bits, l2_mem.read_port(), l2_mem.write_port())

        # ---------------------------------------------------------- queue and ring state
        q = SimpleNamespace(
            entry=[Signal(check_layout(lanes), name=f"q{k}") for k in range(QUEUE_DEPTH)],
            wait=Signal(QUEUE_DEPTH, name="q_wait"),      # a miss waiting for its answer
            head=Signal(_QUEUE_BITS, name="q_head"),
            tail=Signal(_QUEUE_BITS, name="q_tail"),
            count=Signal(range(QUEUE_DEPTH + 1), name="q_count"),
        )
        q_empty = wire(m, q.count == 0, "q_empty")
        q_room = wire(m, q.count != QUEUE_DEPTH, "q_room")
        ring = SimpleNamespace(
            q=[Signal(_QUEUE_BITS, name=f"ring_q{r}") for r in range(MAX_FETCHES)],
            l2=[Signal(range(L2_ENTRIES), name=f"ring_l2_{r}") for r in range(MAX_FETCHES)],
            fill=Signal(MAX_FETCHES, name="ring_fill"),  # allocated L1/L2 entries (not stale)
            slot=[Signal(max(1, sb), name=f"ring_slot{r}") for r in range(MAX_FETCHES)],
            alloc=Signal(_RING_BITS, name="ring_alloc"),
            answer=Signal(_RING_BITS, name="ring_answer"),
            count=Signal(range(MAX_FETCHES + 1), name="ring_count"),    # allocated, not answered
            sent=Signal(range(MAX_FETCHES + 1), name="ring_sent"),      # sent, not answered
        )

        # round 0's key (id_key bits 15..0) of the micro-op's slot, selected as it enters E
        # (the slot mux stays off the path through the round)
        key0 = Signal(16, name="e_key0")
        go_miss = Signal(name="go_miss")
        f1_accept = self._fetch_pipe(m, op, key0, go_miss)
        fetch_room = wire(m, (ring.count != MAX_FETCHES) & f1_accept, "fetch_room")

        # ---------------------------------------------------------- E's decision
        looking = wire(m, valid & ~in_l2 & op.lookup, "e_looking")
        go_direct = wire(m, valid & ~in_l2 & ~op.lookup, "go_direct")
        go_l1 = wire(m, looking & l1.hit & ~l1.hit_pending, "go_l1")
        go_l2 = wire(m, looking & ~l1.hit & l2.hit & ~l2.hit_pending, "go_l2")
        m.d.comb += go_miss.eq(looking & ~l1.hit & ~l2.hit & fetch_room & q_room)
        has_entry = wire(m, go_direct | go_l1 | (valid & in_l2), "e_has_entry")
        hit_leave = wire(m, has_entry & q_room, "hit_leave")
        leave = wire(m, hit_leave | go_miss, "e_leave")
        m.d.comb += self.i.ready.eq(~valid | leave)

        with m.If(self.i.ready):
            m.d.sync += [valid.eq(self.i.valid), op.eq(self.i.payload), in_l2.eq(0)]
            with m.If(self.i.valid):    # (loaded with a micro-op only)
                round0_keys = [self.id_key[s][:16] for s in range(self.slots)]
                m.d.sync += key0.eq(self._per_slot(m, round0_keys, self.i.payload.slot, "e_key0_in"))
            with m.If(self._launch_of(self._slot(self.i.payload.slot))):
                m.d.sync += op.stale.eq(1)      # accepted in its slot's launch cycle
        with m.Else():
            with m.If(go_l2):
                m.d.sync += in_l2.eq(1)
            with m.If(self._launch_of(self._slot(op.slot))):
                m.d.sync += op.stale.eq(1)      # its slot launched: answer, fill nothing
        m.d.comb += [l2.rd.en.eq(go_l2 | self.scrubbing),  # (scrubbing: entry 0, see top)
                     l2.rd.addr.eq(l2.idx)]

        # E's micro-op with its entry: to the checker directly when the queue is empty
        hit_entry = wire(m, Mux(in_l2, l2.rd.data.as_value(), l1.entry), "hit_entry")
        e_out = Signal(check_layout(lanes), name="e_out")
        for name in ("lookup", "cause", "lo", "lane_lo", "hi", "lane_hi", "size_log2", "store",
                     "tag", "last", "slot"):
            m.d.comb += getattr(e_out, name).eq(getattr(op, name))
        m.d.comb += e_out.entry.eq(hit_entry)
        head = _by_index(m, [e.as_value() for e in q.entry], q.head, "q_head_entry")
        head_wait = wire(m, q.wait.bit_select(q.head, 1), "q_head_wait")
        m.d.comb += [
            self.o.valid.eq(Mux(q_empty, has_entry, ~head_wait)),
            self.o.payload.eq(Mux(q_empty, e_out.as_value(), head)),
        ]
        taken = wire(m, self.o.valid & self.o.ready, "o_taken")
        push = wire(m, go_miss | (hit_leave & ~(q_empty & self.o.ready)), "q_push")
        pop = wire(m, taken & ~q_empty, "q_pop")

        # ---------------------------------------------------------- memory answers
        answered = wire(m, self.mem_resp.valid & self.mem_resp.ready, "mem_answered")
        m.d.comb += self.mem_resp.ready.eq(ring.sent != 0)
        rbt = data.View(rbt_entry_layout, self.mem_resp.payload.data)
        fetched = Signal(cache_entry_layout, name="fetched")
        a_index = ring.alloc - 1 if self._formal_mutant == "answer_newest_slot" else ring.answer
        a_slot = _by_index(m, ring.slot, a_index, "answer_slot") if sb else Const(0, 1)
        a_kernel = self._per_slot(m, self.kernel_id, a_slot, "answer_kernel_id")
        m.d.comb += [fetched.base.eq(rbt.base), fetched.size.eq(rbt.size), fetched.valid.eq(rbt.valid),
                     fetched.read_only.eq(rbt.read_only), fetched.kernel_ok.eq(rbt.kernel_id == a_kernel)]
        a_q = _by_index(m, ring.q, ring.answer, "answer_q")
        a_l2 = _by_index(m, ring.l2, ring.answer, "answer_l2")
        fill_l2 = wire(m, answered & ring.fill.bit_select(ring.answer, 1) & l2.pending.bit_select(a_l2, 1),
                       "fill_l2")

        self._queue_update(m, q, answered, a_q, fetched, push, pop, e_out, go_miss)
        self._ring_update(m, ring, q, l2, op, go_miss, answered)

        # ---------------------------------------------------------- fills and flushes
        alloc = wire(m, ~op.stale & (go_miss | (valid & in_l2 & hit_leave)), "l1_alloc")
        self._fill(m, l1, l2, tag, op, alloc, wire(m, go_miss & ~op.stale, "l2_alloc"),
                   wire(m, go_l1 & q_room, "from_l1"), hit_entry, ring, answered, fetched, fill_l2,
                   a_l2)

        self._counters(m, ((self.l1_hits, go_l1 & q_room), (self.l2_hits, valid & in_l2 & hit_leave),
                           (self.misses, go_miss)))
        return m

    # ------------------------------------------------------------------ fetch pipe
    def _fetch_pipe(self, m, op, key0, go_miss):
        """F1 → F2 → ``mem_req``: a miss's decrypted id (round 0 with *key0*, its slot's
        round key) and its slot's RBT base into F1 when *go_miss*, the RBT address into F2.
        Returns F1's accept (room for the next miss)."""
        sb = self._slot_bits
        # The RBT address rbt_base + 16 id only adds 18 bits (16 id < 2**18); bits 47..18 are
        # the base's or the base's + 1 on a carry, and that increment is done in E, so F1 → F2
        # holds an 18-bit adder and a mux instead of a 48-bit adder (bcu measured 24 levels
        # through the 48-bit one).
        f1_layout = data.StructLayout({"dec": ID_BITS, "base": VA_BITS, "base_hi_inc": VA_BITS - _LOW_BITS,
                                       "eid": ID_BITS, "slot": max(1, sb)})
        f1_in = Signal(f1_layout, name="fetch1_in")
        e_base = self._per_slot(m, self.rbt_base, op.slot, "e_rbt_base")
        m.d.comb += [
            f1_in.dec.eq(decrypt_round(m, op.dec_part, Cat(key0, Const(0, KEY_BITS - 16)), 0, "dec_e")),
            f1_in.base.eq(e_base),
            f1_in.base_hi_inc.eq(increment(m, e_base[_LOW_BITS:], "e_rbt_base_hi_inc")),
            f1_in.eid.eq(op.eid),
            f1_in.slot.eq(self._slot(op.slot) if sb else 0),
        ]
        f1_valid, f1, f1_ready, f1_accept = stage(m, f1_layout, go_miss, f1_in, "fetch1")
        f2_in = Signal(fetch_layout(sb), name="fetch2_in")
        low = wire(m, add(m, f1.base[:_LOW_BITS], Cat(Const(0, 4), f1.dec), _LOW_BITS + 1, "rbt_addr_low"),
                   "rbt_addr_low")
        m.d.comb += [f2_in.addr.eq(Cat(low[:_LOW_BITS], Mux(low[_LOW_BITS], f1.base_hi_inc, f1.base[_LOW_BITS:]))),
                     f2_in.eid.eq(f1.eid), f2_in.slot.eq(f1.slot)]
        f2_valid, f2, f2_ready, f2_accept = stage(m, fetch_layout(sb), f1_valid, f2_in, "fetch2")
        m.d.comb += [f1_ready.eq(f2_accept), f2_ready.eq(self.mem_req.ready),
                     self.mem_req.valid.eq(f2_valid), self.mem_req.payload.addr.eq(f2.addr)]
        return f1_accept


    # ------------------------------------------------------------------ answer queue
    def _queue_update(self, m, q, answered, a_q, fetched, push, pop, e_out, go_miss):
        """The in-order answer queue: a memory answer completes its miss's entry; *push*
        appends E's micro-op (a miss waits); *pop* when the head is taken."""
        for k in range(QUEUE_DEPTH):
            with m.If(answered & (a_q == k)):
                m.d.sync += [q.entry[k].entry.eq(fetched), q.wait[k].eq(0)]
            with m.If(push & (q.tail == k)):
                m.d.sync += [q.entry[k].eq(e_out), q.wait[k].eq(go_miss)]
        with m.If(push):
            m.d.sync += q.tail.eq(q.tail + 1)
        with m.If(pop):
            m.d.sync += q.head.eq(q.head + 1)
        _up_down(m, q.count, push, pop)

    # ------------------------------------------------------------------ fetch ring
    def _ring_update(self, m, ring, q, l2, op, go_miss, answered):
        """The fetch ring: a miss allocates an entry (its queue entry, L2 entry, fill flag,
        slot); memory answers free them in order; ``sent`` counts fetches on their way."""
        sb = self._slot_bits
        with m.If(go_miss):
            m.d.sync += ring.alloc.eq(ring.alloc + 1)
            for r in range(MAX_FETCHES):
                with m.If(ring.alloc == r):
                    m.d.sync += [ring.q[r].eq(q.tail), ring.l2[r].eq(l2.ptr),
                                 ring.fill[r].eq(~op.stale), ring.slot[r].eq(self._slot(op.slot) if sb else 0)]
        with m.If(answered):
            m.d.sync += ring.answer.eq(ring.answer + 1)
        _up_down(m, ring.count, go_miss, answered)
        sent = wire(m, self.mem_req.valid & self.mem_req.ready, "mem_sent")
        _up_down(m, ring.sent, sent, answered)


    # ------------------------------------------------------------------ counters
    @staticmethod
    def _counters(m, events):
        """The lookup counters: each (port, event) counts its event, wrapping."""
        for port, event in events:
            # the event is registered first: a lookup is counted the cycle after it leaves E
            # (before its answer), and the lookup logic stays off the counter's carry chain
            seen = Signal(name=f"{port.name}_event")
            count = Signal(COUNTER_BITS, name=f"{port.name}_count")
            m.d.sync += seen.eq(event)
            with m.If(seen):
                m.d.sync += count.eq(increment(m, count, f"{port.name}_inc"))
            m.d.comb += port.eq(count)

    # ------------------------------------------------------------------ L1
    def _l1(self, m, tag, tag_bits):
        """4-way fully associative L1: registers, the hit vector and the hit entry."""
        l1 = SimpleNamespace(
            valid=Signal(L1_ENTRIES, name="l1_valid"),
            pending=Signal(L1_ENTRIES, name="l1_pending"),  # allocated by a miss, not filled yet
            tag=[Signal(tag_bits, name=f"l1_tag{w}") for w in range(L1_ENTRIES)],
            seq=[Signal(_RING_BITS, name=f"l1_seq{w}") for w in range(L1_ENTRIES)],  # its fetch
            data=[Signal(cache_entry_layout, name=f"l1_data{w}") for w in range(L1_ENTRIES)],
            plru=Signal(3, name="l1_plru"),  # [0]: 1 = victim in ways 2-3; [1]: way 1 of 0-1; [2]: way 3 of 2-3
        )
        l1.hitv = wire(m, Cat(l1.valid[w] & (l1.tag[w] == tag) for w in range(L1_ENTRIES)), "l1_hitv")
        l1.hit = wire(m, l1.hitv.any(), "l1_hit")
        l1.hit_pending = wire(m, (l1.hitv & l1.pending).any(), "l1_hit_pending")
        l1.way = _encode(m, l1.hitv, 2, "l1_way")
        l1.entry = wire(m, _or_tree([Mux(l1.hitv[w], l1.data[w].as_value(), 0)
                                     for w in range(L1_ENTRIES)]), "l1_entry")
        return l1

    # ------------------------------------------------------------------ L2
    def _l2(self, m, tag, tag_bits, rd, wr):
        """64-entry fully associative L2: tags, valid and pending bits in registers, entries
        in a memory read one cycle after the tag compare."""
        l2 = SimpleNamespace(valid=Signal(L2_ENTRIES, name="l2_valid"),
                             pending=Signal(L2_ENTRIES, name="l2_pending"),
                             tag=[Signal(tag_bits, name=f"l2_tag{i}") for i in range(L2_ENTRIES)],
                             ptr=Signal(range(L2_ENTRIES), name="l2_ptr"), rd=rd, wr=wr)
        l2.hitv = wire(m, Cat(l2.valid[i] & (l2.tag[i] == tag) for i in range(L2_ENTRIES)), "l2_hitv")
        l2.hit = wire(m, l2.hitv.any(), "l2_hit")
        l2.hit_pending = wire(m, (l2.hitv & l2.pending).any(), "l2_hit_pending")
        l2.idx = _encode(m, l2.hitv, bits_for(L2_ENTRIES - 1), "l2_idx")
        return l2

    # ------------------------------------------------------------------ fills
    def _fill(self, m, l1, l2, tag, op, l1_alloc, l2_alloc, l1_used, hit_entry, ring, answered,
              fetched, fill_l2, a_l2):
        """Allocation at a miss (L1 victim and L2 FIFO entry, pending) or an L2 hit (L1
        victim, filled), the memory answer's fills, the pseudo-LRU update on every L1 use,
        the per-slot flush at a launch, and the L2 reset scrub."""
        sb = self._slot_bits
        # Victim: the lowest invalid way, else the pseudo-LRU way.
        inv, plru = ~l1.valid, l1.plru
        plru_way = Mux(plru[0], Cat(plru[2], 1), Cat(plru[1], 0))
        victim = wire(m, Mux(inv[0], 0, Mux(inv[1], 1, Mux(inv[2], 2, Mux(inv[3], 3, plru_way)))),
                      "victim")
        touch = Mux(l1_alloc, victim, l1.way)
        with m.If(l1_used | l1_alloc):
            # point the tree away from the way just used
            m.d.sync += plru[0].eq(~touch[1])
            with m.If(touch[1]):
                m.d.sync += plru[2].eq(~touch[0])
            with m.Else():
                m.d.sync += plru[1].eq(~touch[0])
        miss = wire(m, l2_alloc, "l1_alloc_pending")     # an allocation by a miss: pending
        op_launch = self._launch_of(self._slot(op.slot))
        for w in range(L1_ENTRIES):
            # the memory answer for this way's pending fetch
            mine = 1 if self._formal_mutant == "fill_any_pending" else l1.seq[w] == ring.answer
            with m.If(answered & l1.pending[w] & mine):
                m.d.sync += [l1.data[w].eq(fetched), l1.pending[w].eq(0)]
            alloc_w = wire(m, l1_alloc & (victim == w), f"l1_alloc{w}")
            with m.If(alloc_w):
                m.d.sync += [l1.valid[w].eq(1), l1.tag[w].eq(tag), l1.pending[w].eq(miss),
                             l1.seq[w].eq(ring.alloc), l1.data[w].eq(hit_entry)]
            # a launch flushes its slot's entries (the slot of the tag after this cycle)
            slot_w = l1.tag[w][ID_BITS:]
            flush_w = Mux(alloc_w, op_launch, self._launch_of(slot_w) if sb else self.launch[0])
            with m.If(0 if self._formal_mutant == "no_flush" else flush_w):
                m.d.sync += [l1.valid[w].eq(0), l1.pending[w].eq(0)]
        # the reset scrub owns the write port while it runs (no micro-op is in E then)
        scrubbing = Signal(init=1, name="l2_scrubbing")
        scrub_ptr = Signal(range(L2_ENTRIES), name="l2_scrub_ptr")
        with m.If(scrubbing):
            m.d.sync += scrub_ptr.eq(increment(m, scrub_ptr, "l2_scrub_inc"))
            with m.If(scrub_ptr == L2_ENTRIES - 1):
                m.d.sync += scrubbing.eq(0)
        m.d.comb += [l2.wr.en.eq(fill_l2 | scrubbing),
                     l2.wr.addr.eq(Mux(scrubbing, scrub_ptr, a_l2)),
                     l2.wr.data.eq(Mux(scrubbing, 0, fetched.as_value())),
                     self.scrubbing.eq(scrubbing)]
        self._scrubbing = scrubbing
        with m.If(l2_alloc):
            m.d.sync += l2.ptr.eq(l2.ptr + 1)
        for i in range(L2_ENTRIES):
            with m.If(fill_l2 & (a_l2 == i)):
                m.d.sync += l2.pending[i].eq(0)
            alloc_i = wire(m, l2_alloc & (l2.ptr == i), f"l2_alloc{i}")
            with m.If(alloc_i):
                m.d.sync += [l2.valid[i].eq(1), l2.pending[i].eq(1), l2.tag[i].eq(tag)]
            slot_i = l2.tag[i][ID_BITS:]
            with m.If(Mux(alloc_i, op_launch, self._launch_of(slot_i) if sb else self.launch[0])):
                m.d.sync += [l2.valid[i].eq(0), l2.pending[i].eq(0)]
