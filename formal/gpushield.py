"""``bcu`` (hw/gpushield): bounds-check soundness, split by mechanism; and the violation-log
counters saturate (``log_counts_saturate``, at the end).

What "sound" means here: every access the BCU lets pass (``ok`` = 1) lies inside the
buffer that its encrypted id names in the RBT as the RBT stood for the launch of the
request's kernel slot, and no answer takes an RBT word fetched for a previous launch. The
spec is written in the harness (49-bit arithmetic on the entry), independent of the RTL's
checker and its adders. Three properties cover it together (docs/gpushield.md,
"Formal properties"):

- ``soundness``: the whole ``BCU`` end to end, requests to answers, over every slot;
- ``rcache_coherence``: the ``Engine`` alone, deeper: RCache hits (L1 and L2) and misses,
  several fetches outstanding, relaunches, which entry an answer carries;
- ``checker_sound``: the ``Checker`` alone: several micro-ops per request (split warps),
  several requests, the first failing group.

Beyond soundness, ``checker_exact`` checks the ``Checker``'s whole answer on the same
instance: the cause and its priority, completeness (an access inside is answered ok), the
lane and address to log, the tag and the slot.

Environment shared by the BCU and engine harnesses:

- Every slot is live (``slots`` = 4): ``launch_s`` and ``retire_s`` free in every cycle,
  ``req_slot`` free; each slot's ``id_key``, ``kernel_id`` and ``rbt_base`` free, and changed
  only in a cycle in which that slot's ``launch`` pulses (the contract: set before the launch
  and kept until the next one). So a relaunch brings a new key, kernel id and RBT base.
- The watched buffer: a slot ``ws``, an encrypted id ``ew`` and a 128-bit RBT entry ``E``
  (``AnyConst``), and one *watched launch* of ``ws``, chosen by the solver among its launch
  pulses: the *epoch* runs from the cycle after that pulse to the cycle of the next
  launch of ``ws``. ``E`` is the RBT entry of ``ew`` during that epoch only.
- The RBT memory: up to :data:`MAX_FETCHES` (4, all the engine allows) fetches outstanding,
  answered in order after any delay, ``mem_req.ready`` and ``mem_resp.valid`` free. A fetch
  issued during the epoch for a micro-op of slot ``ws`` with encrypted id ``ew`` (the tag the
  engine's fetch register F2 carries with the address) is answered with ``E``; every other
  fetch (other ids, other slots, other launches of ``ws``: an RBT rewritten between
  launches) with a free value. So a word from a previous launch never equals ``E`` except
  by the solver's choice, and an answer that takes one is a counterexample.
  **Abstraction**: the fetch *address* (``rbt_base + 16 * decrypt(ew)``) is not related to
  the id: the memory is indexed by the fetch's tag. Relating them would make the solver
  prove the Feistel decryption equal to a second copy of itself (or inverse to an
  encryption), which did not finish; the fetch addresses are compared with the golden
  model's in every cocotb test (tb/gpushield/env.py).
- ``resp.ready`` / the engine's ``o.ready`` free (back-pressure everywhere); requests free
  but following the stream rule (offered and not taken: offered again, unchanged, with its
  ``req_slot``).

Initial state: the reset values of every register that has one (empty pipeline, empty
RCaches, no slot active) and the L2 scrub over (the scrub would cost 64 BMC steps of
nothing); registers without a reset and the L2 entry memory arbitrary. That is a superset
of the state after a reset and its scrub. No reset afterwards.
"""
from amaranth.hdl import Array, Cat, Const, Mux, Signal, Value
from amaranth.lib import data

from hw.gpushield import BCU
from hw.gpushield.checker import Checker
from hw.gpushield.engine import L1_ENTRIES, MAX_FETCHES, Engine, fetch_layout
from hw.gpushield.layout import (
    ID_BITS,
    MAX_SLOTS,
    VA_BITS,
    Cause,
    PtrType,
    cache_entry_layout,
    rbt_entry_layout,
)

from . import Harness, Property, free_inputs, freeze, registers, rtl_constant, submodule, with_mutants

__all__ = ["PROPERTIES"]

LANES = 2               # the end-to-end property: a pair of lanes (two ids in one warp)
ENGINE_LANES = 1        # the engine's lanes only size its lane numbers
CHECKER_LANES = 2
SLOTS = MAX_SLOTS       # every slot live
COUNT_BITS = 6          # requests / micro-ops counted by the harnesses (more than any depth)
SLOT_FIELD = 2          # width of a slot number in micro-ops and the watched slot


# ---------------------------------------------------------------- shared environment
def _start_after_scrub(h, fragment):
    """Assume, in the first cycle, every register with a reset at its reset value and the
    L2 scrub over."""
    for path, sig in registers(fragment):
        if sig.reset_less:
            continue
        init = 0 if path.endswith("l2_scrubbing") else sig.init
        h.assume(~h.first | (sig == init))


def _slot_config(h, launch, name, shape, s):
    """A free configuration value of slot *s* that changes only when *launch* pulses."""
    value = h.any_seq(shape, f"{name}_{s}")
    h.assume(h.first | launch | (value == h.past(value, f"{name}_{s}_prev")))
    return value


def _epoch(h, launch_vec, kernels, start_in_epoch=False):
    """The watched slot (AnyConst) and its watched launch: returns ``(slot, in_epoch,
    kernel)``, ``in_epoch`` high from the cycle after the chosen launch pulse of the slot
    to the cycle of its next launch pulse, *kernel* the slot's kernel id taken at that
    pulse (the port may change again in the cycle of the next one, which is still in the
    epoch). With *start_in_epoch* the first cycle may already be in the epoch (the
    initial state, empty RCaches and pipeline, is the state after a launch with nothing
    in flight)."""
    m = h.m
    ws = h.any_const(SLOT_FIELD, "watched_slot")
    h.assume(ws < SLOTS)
    launch_w = Cat(launch_vec, Const(0, (1 << SLOT_FIELD) - SLOTS)).bit_select(ws, 1)
    pick = h.any_seq(1, "pick_launch")
    in_epoch, chosen = Signal(name="in_epoch"), Signal(name="epoch_chosen")
    kernel = Signal(len(kernels[0]), name="watched_kernel_id")
    if start_in_epoch:
        h.assume(~h.first | ((in_epoch == chosen) & (kernel == Array(kernels)[ws])))
    else:
        h.assume(~h.first | (~in_epoch & ~chosen))
    with m.If(launch_w):
        m.d.sync += [in_epoch.eq(pick & ~chosen), chosen.eq(chosen | pick)]
        with m.If(pick & ~chosen):
            m.d.sync += kernel.eq(Array(kernels)[ws])
    return ws, in_epoch, kernel


def _cached(h, entry, kernel):
    """*entry* as an RCache entry of a kernel with id *kernel*."""
    cached = Signal(cache_entry_layout, name="watched_cache_entry")
    h.m.d.comb += [cached.base.eq(entry.base), cached.size.eq(entry.size), cached.valid.eq(entry.valid),
                   cached.read_only.eq(entry.read_only), cached.kernel_ok.eq(entry.kernel_id == kernel)]
    return cached


def _rbt_memory(h, mem_req, mem_resp, fetch2, ws, ew, in_epoch, entry):
    """The RBT memory: up to MAX_FETCHES outstanding, in order, any latency; a fetch
    issued in the epoch for (ws, ew) (F2's tag, *fetch2*) returns *entry*, any other a free
    word."""
    m = h.m
    mine = Signal(MAX_FETCHES, name="mem_mine")         # per outstanding fetch, oldest in bit 0
    count = Signal(range(MAX_FETCHES + 1), name="mem_outstanding")
    h.assume(~h.first | ((count == 0) & (mine == 0)))
    m.d.comb += [mem_req.ready.eq((count != MAX_FETCHES) & h.any_seq(1, "mem_req_ready")),
                 mem_resp.valid.eq((count != 0) & h.any_seq(1, "mem_resp_valid")),
                 mem_resp.payload.data.eq(Mux(mine[0], entry, h.any_seq(128, "mem_other")))]
    sent = mem_req.valid & mem_req.ready
    answered = mem_resp.valid & mem_resp.ready
    for_watched = in_epoch & (fetch2.eid == ew) & (fetch2.slot == ws[:len(fetch2.slot)])
    shifted = Mux(answered, mine >> 1, mine)
    pos = Signal(range(MAX_FETCHES + 1), name="mem_insert_at")
    m.d.comb += pos.eq(count - answered)
    with m.If(sent):
        m.d.sync += mine.eq((shifted & ~(Const(1, MAX_FETCHES) << pos)) | (for_watched << pos))
    with m.Else():
        m.d.sync += mine.eq(shifted)
    with m.If(sent & ~answered):
        m.d.sync += count.eq(count + 1)
    with m.Elif(answered & ~sent):
        m.d.sync += count.eq(count - 1)


def _l1_lemma(h, regs, prefix, ws, ew, in_epoch, cached):
    """A lemma, checked in every cycle (the BMC then uses it in later steps): in the epoch,
    an L1 way tagged (ws, ew), filled (not pending its fetch), holds the watched entry."""
    tag_w = Cat(ew, ws)
    for way in range(L1_ENTRIES):
        tag, data_ = regs[f"{prefix}l1_tag{way}"], regs[f"{prefix}l1_data{way}"]
        filled = regs[f"{prefix}l1_valid"][way] & ~regs[f"{prefix}l1_pending"][way] & (tag == tag_w)
        h.check(f"lemma_l1_way{way}", ~(in_epoch & filled) | (data_ == Value.cast(cached)))


class _Watch:
    """One watched item of an in-order stream, chosen by the solver (``pick``) among
    those accepted while *eligible*: ``mine`` is high in the cycle its answer leaves (the
    answers are counted, as they come in the order of the items)."""

    def __init__(self, h, accepted, eligible, answered, payload, name):
        m = h.m
        self.picked = Signal(name=f"{name}_picked")
        self.saved = Signal(Value.cast(payload).shape(), name=f"{name}_saved")
        n_in, n_out = Signal(COUNT_BITS, name=f"{name}_in"), Signal(COUNT_BITS, name=f"{name}_out")
        index = Signal(COUNT_BITS, name=f"{name}_index")
        h.assume(~h.first | ((n_in == 0) & (n_out == 0) & ~self.picked))
        h.assume(n_in != (1 << COUNT_BITS) - 1)     # the counters never wrap in the bound
        pick = h.any_seq(1, f"pick_{name}")
        with m.If(accepted):
            m.d.sync += n_in.eq(n_in + 1)
            with m.If(eligible & pick & ~self.picked):
                m.d.sync += [self.picked.eq(1), index.eq(n_in), self.saved.eq(payload)]
        with m.If(answered):
            m.d.sync += n_out.eq(n_out + 1)
        self.mine = Signal(name=f"{name}_answer")
        m.d.comb += self.mine.eq(self.picked & answered & (n_out == index))


# ---------------------------------------------------------------- soundness (the BCU)
def soundness(mutant=None, lanes=LANES):
    """End to end on ``BCU(lanes, slots=4)``: the watched request (one accepted on slot
    ``ws`` during the epoch) answered within the epoch with ``ok`` = 1 and a Type 2 base:
    every active lane of id ``ew`` lies inside ``E``: ``E.base <= addr`` and ``addr +
    2^size_log2 <= E.base + E.size`` (49 bits), ``E`` valid, of the epoch's kernel id, and
    not read-only for a store."""
    h = Harness(reset=False)
    m = h.m
    dut = BCU(lanes, SLOTS, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    m.submodules.dut = frozen
    regs = dict(registers(fragment))
    _start_after_scrub(h, fragment)
    launch = [h.any_seq(1, f"launch_{s}") for s in range(SLOTS)]
    kernels = []
    for s in range(SLOTS):
        m.d.comb += [dut.slot_port("launch", s).eq(launch[s]),
                     dut.slot_port("retire", s).eq(h.any_seq(1, f"retire_{s}"))]
        for name in ("id_key", "rbt_base", "kernel_id"):
            port = dut.slot_port(name, s)
            value = _slot_config(h, launch[s], name, port.shape(), s)
            m.d.comb += port.eq(value)
            if name == "kernel_id":
                kernels.append(value)
    m.d.comb += dut.precise.eq(h.any_seq(1, "precise"))
    ws, in_epoch, kernel_w = _epoch(h, Cat(*launch), kernels)
    # requests (with their slot) and back-pressure: free, requests by the stream rule
    req, resp = dut.req, dut.resp
    offered = Signal(Value.cast(req.payload).shape().width + len(dut.req_slot), name="req_offered")
    m.d.comb += [req.valid.eq(h.any_seq(1, "req_valid")), offered.eq(h.any_seq(len(offered), "req_in")),
                 Cat(Value.cast(req.payload), dut.req_slot).eq(offered),
                 resp.ready.eq(h.any_seq(1, "resp_ready"))]
    held = h.past(req.valid & ~req.ready, "req_held_prev")
    h.assume(h.first | ~held | (req.valid & (offered == h.past(offered, "req_offered_prev"))))
    # the watched buffer and the RBT memory
    ew = h.any_const(ID_BITS, "watched_enc_id")
    entry = h.any_const(rbt_entry_layout, "watched_entry")
    engine = submodule(fragment, "engine")
    fetch2 = data.View(fetch_layout(engine._slot_bits), regs["engine.fetch2"])
    _rbt_memory(h, dut.mem_req, dut.mem_resp, fetch2, ws, ew, in_epoch, entry)
    _l1_lemma(h, regs, "engine.", ws, ew, in_epoch, _cached(h, entry, kernel_w))
    # the watched request and its answer
    accepted = req.valid & req.ready
    watch = _Watch(h, accepted, in_epoch & (dut.req_slot == ws), resp.valid & resp.ready, req.payload, "req")
    saved = data.View(req.payload.shape(), watch.saved)
    t2 = PtrType.T2.value
    size = Cat(Const(1, 1), Const(0, 7)) << saved.size_log2     # 1, 2, 4 or 8 bytes
    limit = Signal(VA_BITS + 1, name="watched_limit")
    m.d.comb += limit.eq(entry.base + entry.size)
    guard = watch.mine & in_epoch & resp.payload.ok & (saved.base.type.as_value() == t2)
    for k in range(lanes):
        ptr = saved.addr[k]
        lane_w = saved.mask[k] & (ptr.type.as_value() == t2) & (ptr.meta.id == ew)
        end = Signal(VA_BITS + 1, name=f"lane{k}_end")
        m.d.comb += end.eq(ptr.addr + size)
        inside = (ptr.addr >= entry.base) & (end <= limit) & entry.valid & (entry.kernel_id == kernel_w) & \
            ~(saved.store & entry.read_only)
        h.check(f"lane{k}_inside_entry", inside, guard=guard & lane_w)
    h.notes.append(f"BCU(lanes={lanes}, slots={SLOTS}); watched slot, id, entry: AnyConst; watched launch: "
                   "chosen; RBT memory: up to 4 outstanding; initial state: resets applied, L2 scrub over")
    return h


# ---------------------------------------------------------------- the RCaches (the engine)
def rcache_coherence(mutant=None, lanes=ENGINE_LANES):
    """On ``Engine(lanes, slots=4)``: the watched micro-op (a lookup of slot ``ws`` with
    encrypted id ``ew``, accepted during the epoch) leaves the engine within the epoch
    with ``E`` as its entry (as the RCache keeps it: kernel id compared with the epoch's),
    whether it hit L1, hit L2, waited on a pending entry or missed. Micro-ops are free (any
    slot, id, ``stale`` bit), so the RCaches see any mix of hits and misses of every slot."""
    h = Harness(reset=False)
    m = h.m
    dut = Engine(lanes, SLOTS, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    m.submodules.dut = frozen
    regs = dict(registers(fragment))
    _start_after_scrub(h, fragment)
    launch = [h.any_seq(1, f"launch_{s}") for s in range(SLOTS)]
    m.d.comb += dut.launch.eq(Cat(*launch))
    kernels = []
    for s in range(SLOTS):
        m.d.comb += [dut.id_key[s].eq(_slot_config(h, launch[s], "id_key", dut.id_key[s].shape(), s)),
                     dut.rbt_base[s].eq(_slot_config(h, launch[s], "rbt_base", dut.rbt_base[s].shape(), s))]
        kernels.append(_slot_config(h, launch[s], "kernel_id", dut.kernel_id[s].shape(), s))
        m.d.comb += dut.kernel_id[s].eq(kernels[-1])
    ws, in_epoch, kernel_w = _epoch(h, Cat(*launch), kernels, start_in_epoch=True)
    # micro-ops: free, by the stream rule; back-pressure on the output free
    i, o = dut.i, dut.o
    m.d.comb += [i.valid.eq(h.any_seq(1, "uop_valid")),
                 Value.cast(i.payload).eq(h.any_seq(len(Value.cast(i.payload)), "uop")),
                 o.ready.eq(h.any_seq(1, "out_ready"))]
    held = h.past(i.valid & ~i.ready, "uop_held_prev")
    h.assume(h.first | ~held | (i.valid & (Value.cast(i.payload) == h.past(i.payload, "uop_prev"))))
    ew = h.any_const(ID_BITS, "watched_enc_id")
    entry = h.any_const(rbt_entry_layout, "watched_entry")
    cached = _cached(h, entry, kernel_w)
    fetch2 = data.View(fetch_layout(dut._slot_bits), regs["fetch2"])
    _rbt_memory(h, dut.mem_req, dut.mem_resp, fetch2, ws, ew, in_epoch, entry)
    _l1_lemma(h, regs, "", ws, ew, in_epoch, cached)
    watched = i.payload.lookup & (i.payload.slot == ws) & (i.payload.eid == ew)
    watch = _Watch(h, i.valid & i.ready, in_epoch & watched, o.valid & o.ready, i.payload, "uop")
    h.check("entry_is_watched", o.payload.entry.as_value() == Value.cast(cached), guard=watch.mine & in_epoch)
    h.notes.append(f"Engine(lanes={lanes}, slots={SLOTS}); watched slot, id, entry: AnyConst; watched launch: "
                   "chosen; RBT memory: up to 4 outstanding; initial state: resets applied, L2 scrub over")
    return h


# ---------------------------------------------------------------- the checker
def _checker_harness(mutant, lanes):
    """``(h, dut, end, limit)``: ``Checker(lanes)`` with every input free, the reset in the
    first cycle, and the spec's 49-bit end of each micro-op's access (``hi + 2^size_log2``)
    and limit of its entry (``base + size``)."""
    h = Harness(reset=True)
    m = h.m
    dut = Checker(lanes, _formal_mutant=mutant)
    m.submodules.dut = dut
    free_inputs(m, dut)
    op = dut.i.payload
    size = Cat(Const(1, 1), Const(0, 7)) << op.size_log2
    end, limit = Signal(VA_BITS + 1, name="spec_end"), Signal(VA_BITS + 1, name="spec_limit")
    m.d.comb += [end.eq(op.hi + size), limit.eq(op.entry.base + op.entry.size)]
    return h, dut, end, limit


def checker_sound(mutant=None, lanes=CHECKER_LANES):
    """On ``Checker(lanes)``: a request's answer says ``ok`` (cause NONE) only if every
    micro-op of the request passed the spec: a lookup has a valid entry of the kernel,
    ``entry.base <= lo`` and ``hi + 2^size_log2 <= entry.base + entry.size`` (49 bits) and is
    not a store to a read-only entry; a micro-op without lookup carries cause NONE. The
    answer carries the request's tag. Micro-ops free (any entry, any split of a request);
    back-pressure free; reset in the first cycle and free afterwards."""
    h, dut, end, limit = _checker_harness(mutant, lanes)
    m, i, o = h.m, dut.i, dut.o
    op = i.payload
    e = op.entry
    op_ok = Signal(name="spec_op_ok")
    m.d.comb += op_ok.eq(Mux(op.lookup, e.valid & e.kernel_ok & (op.lo >= e.base) & (end <= limit) &
                             ~(op.store & e.read_only), op.cause.as_value() == Cause.NONE.value))
    # the request's verdict so far (micro-ops since the last one with `last`)
    so_far = Signal(init=1, name="spec_request_ok")
    accepted = i.valid & i.ready
    with m.If(accepted):
        m.d.sync += so_far.eq(Mux(op.last, 1, so_far & op_ok))
    request = Signal(data.StructLayout({"ok": 1, "tag": len(op.tag)}), name="spec_request")
    m.d.comb += [request.ok.eq(so_far & op_ok), request.tag.eq(op.tag)]
    watch = _Watch(h, accepted & op.last, 1, o.valid & o.ready, request, "request")
    saved = data.View(request.shape(), watch.saved)
    answer = o.payload.log
    h.check("ok_only_if_inside", (answer.cause.as_value() != Cause.NONE.value) | saved.ok, guard=watch.mine)
    h.check("answer_tag", answer.tag == saved.tag, guard=watch.mine)
    h.notes.append(f"Checker(lanes={lanes}); micro-ops free; reset in the first cycle, free afterwards")
    return h


def checker_exact(mutant=None, lanes=CHECKER_LANES):
    """On ``Checker(lanes)``, the same instance as :func:`checker_sound`: every answer is
    exactly the spec's. A micro-op's cause: without lookup, the cause it carries; with one,
    invalid entry (4), else an entry of another kernel (3), else out of bounds (1: ``lo <
    entry.base`` or ``hi + 2^size_log2 > entry.base + entry.size``, 49 bits), else a store
    to a read-only entry (2), else none (0). A request's answer has the cause of its first
    micro-op whose cause is not none (none iff every micro-op passed: an access that is
    inside is not refused), and, when it fails, that micro-op's lane and address to log
    (docs/gpushield.md, ``log_first``: the highest lane, ``hi``, for a group that starts
    inside the buffer and ends past it; the lowest, ``lo``, for anything else, and for a
    micro-op without lookup, whose front put the lane to log there); the tag and the slot
    of its last micro-op. Micro-ops free; back-pressure free; reset in the first cycle and
    free afterwards."""
    h, dut, end, limit = _checker_harness(mutant, lanes)
    m, i, o = h.m, dut.i, dut.o
    op = i.payload
    e = op.entry
    starts_inside = Signal(name="spec_starts_inside")
    ends_inside = Signal(name="spec_ends_inside")
    m.d.comb += [starts_inside.eq(op.lo >= e.base), ends_inside.eq(end <= limit)]
    # the micro-op's cause, in the priority order of docs/gpushield.md
    op_cause = Signal(Cause, name="spec_op_cause")
    with m.If(~op.lookup):
        m.d.comb += op_cause.eq(op.cause)
    with m.Elif(~e.valid):
        m.d.comb += op_cause.eq(Cause.INVALID_ENTRY)
    with m.Elif(~e.kernel_ok):
        m.d.comb += op_cause.eq(Cause.KERNEL)
    with m.Elif(~starts_inside | ~ends_inside):
        m.d.comb += op_cause.eq(Cause.OUT_OF_BOUNDS)
    with m.Elif(op.store & e.read_only):
        m.d.comb += op_cause.eq(Cause.READ_ONLY)
    with m.Else():
        m.d.comb += op_cause.eq(Cause.NONE)
    fails = op_cause != Cause.NONE
    # the lane to log: the one that went furthest when the group overflows from inside
    log_high = op.lookup & (op_cause == Cause.OUT_OF_BOUNDS) & starts_inside
    op_lane, op_addr = Mux(log_high, op.lane_hi, op.lane_lo), Mux(log_high, op.hi, op.lo)
    # the first failing micro-op of the request so far (cause none: none failed yet)
    first = Signal(data.StructLayout({"cause": Cause, "lane": len(op.lane_lo), "addr": VA_BITS}),
                   name="spec_first_failure")
    accepted = i.valid & i.ready
    with m.If(accepted):
        with m.If(op.last):
            m.d.sync += first.cause.eq(Cause.NONE)
        with m.Elif((first.cause == Cause.NONE) & fails):
            m.d.sync += [first.cause.eq(op_cause), first.lane.eq(op_lane), first.addr.eq(op_addr)]
    earlier = first.cause != Cause.NONE
    request = Signal(data.StructLayout({"cause": Cause, "lane": len(op.lane_lo), "addr": VA_BITS,
                                        "tag": len(op.tag), "slot": len(op.slot)}), name="spec_request")
    m.d.comb += [request.cause.eq(Mux(earlier, first.cause, op_cause)),
                 request.lane.eq(Mux(earlier, first.lane, op_lane)),
                 request.addr.eq(Mux(earlier, first.addr, op_addr)),
                 request.tag.eq(op.tag), request.slot.eq(op.slot)]
    watch = _Watch(h, accepted & op.last, 1, o.valid & o.ready, request, "request")
    saved = data.View(request.shape(), watch.saved)
    answer = o.payload
    failed = saved.cause != Cause.NONE
    h.check("answer_cause", answer.log.cause == saved.cause, guard=watch.mine)
    h.check("answer_lane", answer.log.lane == saved.lane, guard=watch.mine & failed)
    h.check("answer_addr", answer.log.addr == saved.addr, guard=watch.mine & failed)
    h.check("answer_tag", answer.log.tag == saved.tag, guard=watch.mine)
    h.check("answer_slot", answer.slot == saved.slot, guard=watch.mine)
    h.notes.append(f"Checker(lanes={lanes}); micro-ops free; reset in the first cycle, free afterwards")
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


SOUNDNESS_DEPTH = 14
RCACHE_DEPTH = 10
CHECKER_DEPTH = 14
CHECKER_EXACT_DEPTH = 10
PROPERTIES = [
    *with_mutants(
        Property("bcu", "soundness", soundness, depth=SOUNDNESS_DEPTH, params={"lanes": LANES, "slots": SLOTS},
                 fast=False,
                 doc="ok for a Type 2 warp of any slot, accepted and answered in one launch: every active lane "
                     "of the watched id is inside the entry the RBT held for it in that launch",
                 depth_reason="a warp's answer from an RBT fetch leaves in step 12 at the earliest (the slot "
                              "active from step 1; 3 front registers; E, F1, F2, mem_req, mem_resp, the queue; "
                              "3 checker registers), a 2-id warp's (two micro-ops, two fetches) in step 13: "
                              "14 steps cover every warp answered from fetches, with launches, retires, other "
                              "slots' requests and back-pressure before it; hits and relaunch hazards need "
                              "more steps and are rcache_coherence's"),
        ("ignore_size", "the checker ends an access at its first byte (ignores the access size)"),
        ("end_last_byte", "the checker ends an access at its last byte, compared against the one-past limit "
                          "(off by one at the bound)"),
    ),
    *with_mutants(
        Property("bcu", "rcache_coherence", rcache_coherence, depth=RCACHE_DEPTH,
                 params={"lanes": ENGINE_LANES, "slots": SLOTS, "design": "Engine"}, fast=False,
                 doc="a lookup of the watched (slot, id) accepted and answered in one launch leaves the "
                     "engine with the entry the RBT held for it in that launch: L1/L2 hits, misses, pending "
                     "hits, 4 fetches outstanding, relaunches",
                 depth_reason="the first cycle may be in the watched launch (empty RCaches): a miss "
                              "accepted in step 0 is in E in step 1, its fetch in F1 2, F2/mem_req 3, its "
                              "answer in step 4; a hit on it (L1, or waiting on the pending entry) leaves by "
                              "step 6; a fill in the previous launch, the watched launch, then a hit in it, by "
                              "step 8; 4 misses in E in steps 1-4 have 4 fetches outstanding from step 6. "
                              "10 steps cover these with micro-ops of other ids and slots around them; an L2 "
                              "hit (after 4 more misses evict the L1 way) needs about 11 and is not covered "
                              "(step 9 alone took 6 minutes)"),
        ("no_flush", "a launch does not invalidate its slot's L1 ways (a hit after a relaunch)",
         "Engine._formal_mutant"),
        ("fill_any_pending", "a memory answer fills every pending L1 way, not only the way waiting for that "
                             "fetch (another fetch's or a previous launch's RBT word)", "Engine._formal_mutant"),
        ("answer_newest_slot", "a memory answer is taken as for the slot of the newest outstanding fetch "
                               "instead of its own (its kernel id compared with another slot's)",
         "Engine._formal_mutant"),
    ),
    *with_mutants(
        Property("bcu", "checker_sound", checker_sound, depth=CHECKER_DEPTH,
                 params={"lanes": CHECKER_LANES, "design": "Checker"}, fast=False,
                 doc="the checker's answer is ok only if every micro-op of its request is inside its entry "
                     "(spec in 49-bit arithmetic) or carries no cause; the answer has the request's tag",
                 depth_reason="after the reset in step 0, a request of one micro-op is answered in step 4 "
                              "(C1, C2, OUT), one of n micro-ops in step 3 + n: 14 steps cover requests of up "
                              "to 10 micro-ops, and several requests back to back, with back-pressure"),
        ("ignore_size", "the checker ends an access at its first byte (ignores the access size)"),
        ("end_last_byte", "the checker ends an access at its last byte, compared against the one-past limit "
                          "(off by one at the bound)"),
    ),
    *with_mutants(
        Property("bcu", "checker_exact", checker_exact, depth=CHECKER_EXACT_DEPTH,
                 params={"lanes": CHECKER_LANES, "design": "Checker"}, fast=False,
                 doc="the checker's answer is exactly the spec's: the cause of the request's first failing "
                     "micro-op in the priority 4, 3, 1, 2 (none iff every micro-op passed), its lane and "
                     "address to log, the request's tag and slot",
                 depth_reason="a request of n micro-ops accepted after the reset in step 0 is answered in "
                              "step 3 + n (C1, C2, OUT): 10 steps cover requests of up to 6 micro-ops, so a "
                              "first failing group with failing groups after it (3 micro-ops), and requests "
                              "back to back, with back-pressure; every cause and lane choice needs one "
                              "micro-op (step 4). Deeper is checker_sound's (14); here step 11 alone took 4.5 "
                              "minutes, step 12 did not finish in 6"),
        ("limit_exclusive", "the checker refuses an access that ends exactly at the limit (end >= limit)"),
        ("bounds_before_kernel", "the checker ranks out of bounds (1) before an entry of another kernel (3)"),
        ("under_logs_high", "a group that starts below the buffer and ends past it logs its highest lane"),
        ("last_group_logged", "a split warp is answered with its last failing group instead of its first"),
    ),
    *with_mutants(Property("bcu", "log_counts_saturate", log_counts_saturate, depth=2, induction=1,
                           params={"lanes": COUNTER_LANES},
                           doc="every slot's violation-log count holds or counts up by one unless reset "
                               "or launched: it holds at 2^32 - 1"),
                  ("log_wraps", "a slot's log count counts on past 2^32 - 1 (to 0)")),
]
