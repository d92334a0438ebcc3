"""``bcu`` (hw/gpushield): bounds-check soundness for Type 2 warps, over a symbolic RBT
entry; and the violation-log counters saturate (``log_counts_saturate``, at the end).

Design: ``BCU(lanes=4)`` (the pipeline, the L1/L2 RCaches, the checker; small lane count so
the front stays small).

Environment (the harness):

- ``id_key``, ``kernel_id``, ``rbt_base`` are constants (``AnyConst``: every value); ``launch``
  and ``precise`` are free in every cycle (a launch flushes the caches; the key does not
  change, so the cached entries stay valid for it).
- A watched buffer: a symbolic encrypted id ``ew`` and a symbolic 128-bit RBT entry ``E``.
  The RBT memory is modelled with one request outstanding, answered after any delay: the
  fetch issued for a micro-op of slot 0 with encrypted id ``ew`` (the engine's fetch
  register F2 carries the tag with the address) is answered with ``E``, every other fetch
  with a free
  value. So ``E`` is "the entry fetched for its id"; the fetch *address* (``rbt_base +
  16 * decrypt(ew)``) is not part of this property — relating it to the id would make the
  solver prove the Feistel cipher's decryption inverse to an encryption, which does not
  finish (the id cipher is checked against the golden model in simulation).
- Requests are free but follow the stream rule (a request offered and not taken is offered
  again, unchanged: the front issues a multi-id warp over several cycles from the port).
- One watched request, chosen by the solver among the accepted ones (a free ``pick`` at
  acceptance), is recorded; answers come in request order, so the harness counts requests
  and answers to find its answer.

Property ``soundness``: if the watched request's answer has ``ok`` = 1 and its base pointer
is Type 2, then every active lane whose pointer is Type 2 with encrypted id ``ew``
accesses only bytes inside ``E``: ``E.base <= addr`` and ``addr + 2^size_log2 <= E.base +
E.size`` (49-bit arithmetic), and ``E`` is valid, belongs to ``kernel_id``, and is not
read-only when the access is a store. Two lemmas are checked in every cycle as well: an L1
way tagged ``ew`` holds ``E`` (as the RCache entry: base, size, valid, read-only, kernel
match), and the engine's answer for a micro-op of id ``ew`` carries it.

Initial state: the BCU's reset scrub (the L2 entries zeroed one per cycle, ``scrub_cycles``
= 64) would cost 64 BMC steps of nothing, so the BMC starts instead in any state in which
every register with a reset holds its reset value (empty pipeline, empty RCaches) and the
L2 scrub is over; registers without a reset and the L2 entry memory are arbitrary. That
is a superset of the state the BCU is in after a reset and its scrub. No reset afterwards.

**Bounded, 13 steps.** The first answer can leave in step 12: slot 0 is active from the
step after its first ``launch`` (step 1), the request is accepted then, front 3 registers,
the engine's miss (E, the fetch pipe F1, F2 and ``mem_req``, ``mem_resp``, the answer
queue), checker 3 registers. The bound covers every warp answered from a fetch (any number
of micro-ops, lanes of other ids, launches, stalls and back-pressure before it) — the
mutant fails in step 12 — but not an answer from an RCache *hit* of the watched id, which
needs more steps (a fill, then a second request; with the blocking engine step 12 did not
finish within 15 minutes, nor did variants that start with an L1 already holding ``E``).
The L1 lemma is proved for every reachable fill within the bound. No induction: the cache
contents would need an invariant over the L2 entry memory.
"""
from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import data

from hw.gpushield import BCU
from hw.gpushield.engine import L1_ENTRIES, fetch_layout
from hw.gpushield.layout import ID_BITS, VA_BITS, PtrType, cache_entry_layout, rbt_entry_layout

from . import Harness, Property, free_inputs, freeze, registers, rtl_constant, submodule, with_mutant

__all__ = ["PROPERTIES"]

LANES = 4
FIRST_ONLY = False      # True: the watched request is the first one accepted
COUNT_BITS = 6          # requests counted by the harness (more than the BMC depth)


def soundness(mutant=None, lanes=LANES):
    h = Harness(reset=False)
    m = h.m
    dut = BCU(lanes, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    m.submodules.dut = frozen
    # the state after a reset and the L2 scrub (empty RCaches)
    regs = dict(registers(fragment))
    for path, sig in regs.items():
        if sig.reset_less:
            continue
        init = 0 if path.endswith("l2_scrubbing") else sig.init
        h.assume(~h.first | (sig == init))
    # configuration: constants
    key = h.any_const(dut.id_key.shape(), "id_key")
    kernel = h.any_const(dut.kernel_id.shape(), "kernel_id")
    rbt = h.any_const(dut.rbt_base.shape(), "rbt_base")      # (the fetch address: not checked)
    m.d.comb += [dut.id_key.eq(key), dut.kernel_id.eq(kernel), dut.rbt_base.eq(rbt),
                 dut.launch.eq(h.any_seq(1, "launch")), dut.precise.eq(h.any_seq(1, "precise"))]
    # requests and answer back-pressure: free
    m.d.comb += [dut.req.valid.eq(h.any_seq(1, "req_valid")),
                 Value.cast(dut.req.payload).eq(h.any_seq(len(Value.cast(dut.req.payload)), "req_payload")),
                 dut.resp.ready.eq(h.any_seq(1, "resp_ready"))]
    # the stream rule on req: a request offered and not taken stays, unchanged
    held = h.past(dut.req.valid & ~dut.req.ready, "req_held_prev")
    payload_prev = h.past(dut.req.payload, "req_payload_prev")
    h.assume(h.first | ~held | (dut.req.valid & (Value.cast(dut.req.payload) == payload_prev)))
    # the watched buffer: its encrypted id and its RBT entry
    watched = h.any_const(ID_BITS, "watched_enc_id")
    entry = h.any_const(rbt_entry_layout, "watched_entry")
    # the RBT memory, one request outstanding, any latency: a fetch for the watched id of
    # slot 0 (the tag the engine's fetch register F2 carries with the address it drives)
    # returns the entry, any other fetch a free value
    engine = submodule(fragment, "engine")
    fetch = data.View(fetch_layout(engine._slot_bits), regs["engine.fetch2"])
    pend, pend_mine = Signal(name="mem_pending"), Signal(name="mem_for_watched")
    m.d.comb += dut.mem_req.ready.eq(~pend & h.any_seq(1, "mem_req_ready"))
    with m.If(dut.mem_req.valid & dut.mem_req.ready):
        m.d.sync += [pend.eq(1), pend_mine.eq((fetch.eid == watched) & (fetch.slot == 0))]
    with m.Elif(dut.mem_resp.valid & dut.mem_resp.ready):
        m.d.sync += pend.eq(0)
    m.d.comb += [dut.mem_resp.valid.eq(pend & h.any_seq(1, "mem_resp_valid")),
                 dut.mem_resp.payload.data.eq(Mux(pend_mine, entry, h.any_seq(128, "mem_other")))]
    h.assume(~h.first | ~pend)
    # a lemma, checked in every cycle (the BMC then uses it in later steps): an L1 way
    # tagged with the watched id of slot 0, filled (not pending its fetch), holds its entry
    cached = Signal(cache_entry_layout, name="watched_cache_entry")
    m.d.comb += [cached.base.eq(entry.base), cached.size.eq(entry.size),
                 cached.valid.eq(entry.valid), cached.read_only.eq(entry.read_only),
                 cached.kernel_ok.eq(entry.kernel_id == kernel)]
    l1_valid, l1_pending = regs["engine.l1_valid"], regs["engine.l1_pending"]
    for way in range(L1_ENTRIES):
        tag, data_ = regs[f"engine.l1_tag{way}"], regs[f"engine.l1_data{way}"]
        filled = l1_valid[way] & ~l1_pending[way] & (tag == Cat(watched, Const(0, len(tag) - ID_BITS)))
        h.check(f"lemma_l1_way{way}", ~filled | (data_ == Value.cast(cached)))
    # the watched request and its answer
    req, resp = dut.req, dut.resp
    accepted = req.valid & req.ready
    answered = resp.valid & resp.ready
    n_req, n_resp = Signal(COUNT_BITS, name="requests"), Signal(COUNT_BITS, name="answers")
    picked, index = Signal(name="picked"), Signal(COUNT_BITS, name="picked_index")
    saved = Signal(req.payload.shape(), name="picked_req")
    pick = h.any_seq(1, "pick")
    if FIRST_ONLY:
        h.assume(~accepted | picked | pick)     # the first request accepted is the watched one
    h.assume(~h.first | ((n_req == 0) & (n_resp == 0) & ~picked))
    with m.If(accepted):
        m.d.sync += n_req.eq(n_req + 1)
        with m.If(pick & ~picked):
            m.d.sync += [picked.eq(1), index.eq(n_req), saved.eq(req.payload)]
    with m.If(answered):
        m.d.sync += n_resp.eq(n_resp + 1)
    h.assume(n_req != (1 << COUNT_BITS) - 1)        # the counters never wrap in the bound
    mine = picked & answered & (n_resp == index)
    t2 = PtrType.T2.value
    base_t2 = saved.base.type.as_value() == t2
    size = Cat(Const(1, 1), Const(0, 7)) << saved.size_log2     # 1, 2, 4 or 8 bytes
    e = entry
    limit = Signal(VA_BITS + 1, name="watched_limit")
    m.d.comb += limit.eq(e.base + e.size)
    for k in range(lanes):
        ptr = saved.addr[k]
        lane_w = saved.mask[k] & (ptr.type.as_value() == t2) & (ptr.meta.id == watched)
        end = Signal(VA_BITS + 1, name=f"lane{k}_end")
        m.d.comb += end.eq(ptr.addr + size)
        inside = (ptr.addr >= e.base) & (end <= limit) & e.valid & (e.kernel_id == kernel) & \
            ~(saved.store & e.read_only)
        h.check(f"lane{k}_inside_entry", inside, guard=mine & resp.payload.ok & base_t2 & lane_w)
    h.notes.append(f"BCU(lanes={lanes}); watched id: AnyConst, entry: AnyConst; "
                   "initial state: resets applied, L2 scrub over")
    return h


# the counters' property runs on the bcu design itself: BCU() with its default lanes
COUNTER_LANES = rtl_constant(BCU, "lanes")


def log_counts_saturate(mutant=None, lanes=COUNTER_LANES):
    """Every slot's ``log_count`` holds or counts up by one unless the reset or the slot's
    launch cleared it: at 2³² − 1 it holds. From any state, every input free; proved by
    1-induction (one transition)."""
    h = Harness(reset="free")
    dut = BCU(lanes, _formal_mutant=mutant)
    h.m.submodules.dut = dut
    free_inputs(h.m, dut)
    for s in range(dut.slots):
        h.counts_by_one(f"log_count{s}", dut.slot_port("log_count", s), h.rst | dut.slot_port("launch", s))
    h.notes.append(f"BCU(lanes={lanes}); reset and inputs free in every cycle, any initial state")
    return h


DEPTH = 13
PROPERTIES = [
    *with_mutant(Property("bcu", "soundness", soundness, depth=DEPTH, params={"lanes": LANES},
                          doc="ok for a Type 2 warp: every active lane of the watched id is inside the "
                              "(symbolic) entry fetched for it; bounded: answers from a fetch"),
                 "ignore_size", "the checker ends an access at its first byte (ignores the access size)"),
    *with_mutant(Property("bcu", "log_counts_saturate", log_counts_saturate, depth=2, induction=1,
                          params={"lanes": COUNTER_LANES},
                          doc="every slot's violation-log count holds or counts up by one unless reset "
                              "or launched: it holds at 2^32 - 1"),
                 "log_wraps", "a slot's log count counts on past 2^32 - 1 (to 0)"),
]
