"""cocotb regression of ``bcu``'s kernel slots and RBT protection (docs/gpushield.md,
"Kernel slots" and "RBT protection") against the golden model.

Each slot is used by a kernel of its own driver context (:meth:`BcuTB.driver` with a
context number: its own address range, RBTs, key and kernel id), so a pointer of one
kernel is never valid on another's slot. Every response (tag, ok, cause), every RBT fetch
address, every ``exc`` pulse, and at checkpoints every slot's log and the counters are
compared with :class:`~sw.gpushield.model.BCUModel` (tb/gpushield/env.py); causes the test
can name independently of the model are asserted by hand as well.
"""
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gpushield.layout import ID_BITS, KERNEL_ID_BITS, RBT_BYTES, RBT_ENTRY_BYTES, Cause
from sw.gpushield.model import (
    L1_ENTRIES,
    WarpRequest,
    encrypt_id,
    pack_entry,
    pointer,
    pointer_addr,
    t1_pointer,
    t2_pointer,
    t3_pointer,
    with_addr,
)
from sw.gpushield.traces import VIOLATIONS, kernel, to_request, violations
from tb.common.stream import interleave
from tb.gpushield.env import LANES, SLOTS, BcuTB, slot_port

FULL = (1 << LANES) - 1


def _buffers(drv):
    for name, (size, ro) in {"x": (4096, False), "y": (8192, True), "z": (2048, False),
                             "w": (100_000, False)}.items():
        drv.alloc_global(name, size, read_only=ro)
    drv.alloc_t3("t", 12)


def _contig(launch, name, first, store=False, size_log2=2, mask=FULL):
    return WarpRequest(launch.ptr(name), [launch.ptr(name, first + (k << size_log2)) for k in range(LANES)],
                       mask, size_log2, store)


@cocotb.test()
@cocotb.parametrize(precise=[False, True])
async def attacks_per_slot(dut, precise):
    """Today's attack suite (every kind of violation of sw/gpushield/traces.py) on every
    slot, with all slots active and their in-bounds traffic interleaved between the
    violations: each caught with the model's cause (and the suite's own expected cause),
    the first violation of each slot in that slot's log, exc pulses in precise mode only.
    Two launches per slot per round (stale pointers need the previous launch)."""
    tb = BcuTB(dut, mem_latency=(1, 12))
    tb.set_stalls(idle=0.1, stall=0.2)
    await tb.reset()
    drivers = [tb.driver(context=s) for s in range(SLOTS)]
    ok_ops = []
    for drv in drivers:
        _buffers(drv)
        ok_ops.append(list(kernel("streaming", drv, n=256).ops()))
    prev = [drv.launch(slot=s) for s, drv in enumerate(drivers)]
    caught = {(s, k): 0 for s in range(SLOTS) for k in VIOLATIONS}
    for r in range(2):
        launches = [drv.launch(slot=s) for s, drv in enumerate(drivers)]
        for la in launches:
            await tb.launch(la, precise)
        first_bad = {}
        streams = [list(violations(la, pv, random, lanes=LANES)) for la, pv in zip(launches, prev)]
        for s, kind, req, cause in interleave([[(s, *v) for v in vs] for s, vs in enumerate(streams)], random):
            ok = random.choice(range(SLOTS))
            for op in random.sample(ok_ops[ok], 2):
                tb.submit(to_request(op, launches[ok], lanes=LANES), ok)
            res = tb.submit(req, s)
            assert not res.ok, f"slot {s}: model misses violation {kind}"
            assert cause is None or res.cause is cause, f"slot {s} {kind}: model cause {res.cause}, expected {cause}"
            first_bad.setdefault(s, res.tag)
            caught[(s, kind)] += 1
        await tb.check_state(f"round {r}")
        for s in range(SLOTS):
            assert tb.model.slots[s].log_first[0] == first_bad[s], f"slot {s}: log_first is not its first violation"
        prev = launches
    assert all(caught.values()), [k for k, v in caught.items() if not v]
    bad = [r.tag for _, r, _ in tb.results if not r.ok]
    assert tb.exc_tags == (bad if precise else []), "exc pulses differ from the failing responses"


@cocotb.test()
async def pointers_of_another_kernel(dut):
    """Kernel A on slot 0 and kernel B on slot 1 (other contexts, both active): every
    in-bounds request of A presented on B's slot fails (and B's on A's), while the same
    requests on their own slots pass; each failure in the log of the slot it was presented
    on. Then A's and B's requests run again on their own slots, still passing."""
    tb = BcuTB(dut, mem_latency=(1, 8))
    tb.set_stalls(idle=0.1, stall=0.1)
    await tb.reset()
    kernels = {}
    for s, name in ((0, "many_buffers"), (1, "gather_scatter")):
        drv = tb.driver(context=s)
        k = kernel(name, drv)
        la = drv.launch(slot=s)
        await tb.launch(la)
        kernels[s] = (la, list(k.ops())[:150])
    for s, other in ((0, 1), (1, 0)):
        la, ops = kernels[s]
        for op in ops[:60]:
            good = tb.submit(to_request(op, la, lanes=LANES), s)
            stolen = tb.submit(to_request(op, la, lanes=LANES), other)
            assert good.ok and not stolen.ok, f"slot {s}'s request on slot {other}: model {stolen}"
            # no entry of the owner's slot can answer it: ids decrypt under the wrong key
            # into the other kernel's table, where the entries are invalid or elsewhere
            assert stolen.cause in (Cause.INVALID_ENTRY, Cause.OUT_OF_BOUNDS), stolen
    await tb.check_state("stolen pointers")
    assert tb.model.slots[0].log_count == tb.model.slots[1].log_count == 60
    for s in (0, 1):
        tb.submit_ops(kernels[s][1], kernels[s][0])
    await tb.check_state("own slots again")
    assert all(r.ok for _, r, _ in tb.results[-300:])


@cocotb.test()
@cocotb.parametrize(stalls=["none", "idle_and_backpressure"])
async def interleaved_traces(dut, stalls):
    """Four kernels (one per slot, all active at once) whose traces are interleaved request
    by request at random: no false alarm, every answer, fetch and counter as the model's
    (the RCaches shared by four kernels, each entry tagged with its slot)."""
    tb = BcuTB(dut, mem_latency=(2, 30))
    if stalls != "none":
        tb.set_stalls(idle=0.3, stall=0.3, mem_stall=0.3, mem_idle=0.3)
    await tb.reset()
    names = ["many_buffers", "mixed_ids", "gather_scatter", "streaming", "bfs", "heap"]
    picked = random.sample(names, SLOTS)
    streams, tables = [], []
    for s, name in enumerate(picked):
        drv = tb.driver(context=s)
        k = kernel(name, drv)
        la = drv.launch(slot=s)
        await tb.launch(la)
        tables.append(range(la.rbt_base, la.rbt_base + RBT_BYTES))
        streams.append([(s, to_request(op, la, lanes=LANES)) for op in list(k.ops())[:400]])
    fetched = {s: 0 for s in range(SLOTS)}
    for s, req in interleave(streams, random):
        res = tb.submit(req, s)
        assert all(f in tables[s] for f in res.fetches), f"slot {s} fetches outside its RBT: {res.fetches}"
        fetched[s] += len(res.fetches)
    await tb.check_state(f"interleaved {picked}")
    assert all(r.ok for _, r, _ in tb.results), f"false alarms: {[r for _, r, _ in tb.results if not r.ok][:3]}"
    assert all(fetched.values()), f"every slot's kernel fetches its own entries: {fetched}"
    tb.log.info("%s: %d requests, L1 %d, L2 %d, misses %d", picked, len(tb.results),
                tb.model.l1_hits, tb.model.l2_hits, tb.model.misses)


@cocotb.test()
async def launch_and_retire_during_traffic(dut):
    """Slot 0 streams L1 hits (two buffers, resident) while slot 1 is relaunched, and later
    retired, in the middle of that stream: slot 0's requests keep hitting (the model
    classifies them as L1 hits and the RTL's L1 counter agrees), slot 1's new launch
    misses on its ids (its entries were flushed), and after the retire slot 1's requests
    fail with cause 3 and no lookup; slot 0's log is untouched by slot 1's launch."""
    tb = BcuTB(dut, mem_latency=(4, 10))
    await tb.reset()
    da, db = tb.driver(context=0), tb.driver(context=1)
    for d in (da, db):
        d.alloc_global("p", 8192)
        d.alloc_global("q", 8192)
    la, lb = da.launch(slot=0), db.launch(slot=1)
    await tb.launch(la)
    await tb.launch(lb)

    def req(launch, name, first=0, store=False):
        return _contig(launch, name, first % 8000, store)

    for launch in (la, lb):
        for n in ("p", "q"):
            tb.submit(req(launch, n), launch.slot)
    tb.submit(_contig(la, "p", 8192 - 4), 0)         # one violation in slot 0's log
    await tb.check_state("warm")
    assert tb.model.misses == 4 and tb.model.slots[0].log_count == 1

    async def stream_of_hits(count):
        before = (len(tb.results), tb.model.l1_hits)
        results = [tb.submit(req(la, random.choice("pq"), 4 * random.randrange(2000)), 0) for _ in range(count)]
        assert all(r.uops[0].level == "L1" for r in results), "slot 0's stream should be L1 hits"
        for _ in range(25):                          # the stream is flowing
            await RisingEdge(tb.clk)
        return before, results

    # relaunch slot 1 with a new key in the middle of slot 0's stream
    (answered, hits), _ = await stream_of_hits(200)
    lb2 = db.launch(slot=1)
    await tb.launch(lb2, drain=False)
    at = len(tb.answered)
    await tb.drain()
    assert answered + 10 < at < answered + 190, f"launch not during the stream ({answered} .. {at})"
    await tb.check_state("slot 1 relaunched during slot 0's hits")
    assert tb.model.l1_hits - hits == 200 and tb.model.slots[0].log_count == 1
    misses = tb.model.misses
    for n in ("p", "q"):
        assert tb.submit(req(lb2, n), 1).uops[0].level == "mem", "slot 1's entries survived its launch"
    old = tb.submit(req(lb, "p"), 1)               # the previous launch's pointer: stale now
    assert not old.ok or old.uops[0].level == "mem"
    await tb.check_state("slot 1 after its launch")
    assert tb.model.misses - misses >= 2

    # retire slot 1 in the middle of slot 0's stream (slot 1's fills may have evicted
    # slot 0's entries from L1: make them resident again first)
    for n in ("p", "q"):
        tb.submit(req(la, n), 0)
    (answered, hits), _ = await stream_of_hits(200)
    await tb.retire(1, drain=False)
    at = len(tb.answered)
    await tb.drain()
    assert answered + 10 < at < answered + 190, f"retire not during the stream ({answered} .. {at})"
    await tb.check_state("slot 1 retired during slot 0's hits")
    assert tb.model.l1_hits - hits == 200
    lookups = tb.model.l1_hits + tb.model.l2_hits + tb.model.misses
    for n in ("p", "q"):
        r = tb.submit(req(lb2, n), 1)
        assert (r.ok, r.cause, r.uops[0].eid) == (False, Cause.KERNEL, None), r
    await tb.check_state("requests on the retired slot")
    assert tb.model.l1_hits + tb.model.l2_hits + tb.model.misses == lookups, "a retired slot looked up"
    assert tb.model.slots[1].log_count == 2 + (not old.ok) and tb.model.slots[0].log_count == 1


def _lanes(base, ptrs, size_log2=2, store=True, mask=FULL):
    """A request whose lanes are *ptrs* (cycled over the warp)."""
    return WarpRequest(base, [ptrs[k % len(ptrs)] for k in range(LANES)], mask, size_log2, store)


@cocotb.test()
@cocotb.parametrize(precise=[False, True])
async def rbt_stores(dut, precise):
    """Stores into the RBT of an active slot fail with cause 6 from every pointer type
    (Type 1, a Type 2 pointer of a real buffer moved into the table, Type 3), from the
    slot's own kernel and from another slot, at both ends of the 256 KiB table, with
    unaligned lanes crossing into it from below (2-, 4- and 8-byte accesses); a lane of
    invalid or mismatched type still fails with cause 5 (checked first); stores just
    outside the table, loads from it, inactive lanes in it and stores into the table of a
    retired slot pass (Type 1). Every answer and log against the model,
    and the causes by hand."""
    tb = BcuTB(dut, mem_latency=(1, 6))
    tb.set_stalls(idle=0.2, stall=0.2)
    await tb.reset()
    drivers = [tb.driver(context=s) for s in range(SLOTS)]
    launches = []
    for s, d in enumerate(drivers):
        d.alloc_global("buf", 4096)
        d.alloc_t3("t3", 12)
        launches.append(d.launch(slot=s))
        await tb.launch(launches[-1], precise=precise)
    await tb.retire(SLOTS - 1)                       # last slot: launched, then retired
    active = range(SLOTS - 1)
    expected = []                                    # (request result, cause by hand)

    def check(req, slot, cause):
        expected.append((tb.submit(req, slot), cause))

    for s in active:
        rbt, end = launches[s].rbt_base, launches[s].rbt_base + RBT_BYTES
        for src in active:                          # from its own slot and from the others
            la = launches[src]
            t1 = t1_pointer
            # Type 1 into the table: first entry, a middle one, the last bytes
            for addr in (rbt, rbt + 16 * random.randrange(1 << 14), end - 4):
                check(_lanes(t1(addr), [t1(addr)]), src, Cause.RBT_STORE)
            # Type 2: the kernel's own buffer pointer, moved into the table (forged address)
            p = la.ptr("buf")
            check(_lanes(p, [p, with_addr(p, rbt + 32)]), src, Cause.RBT_STORE)
            # Type 3: a block pointer moved into the table
            q = la.ptr("t3")
            check(_lanes(q, [with_addr(q, rbt + 64)]), src, Cause.RBT_STORE)
            # unaligned lanes crossing into the table from below, and out of it at the top
            for size_log2, below in ((1, 1), (2, 2), (2, 1), (3, 7), (3, 1)):
                check(_lanes(t1(rbt - 64), [t1(rbt - 64), t1(rbt - below)], size_log2), src, Cause.RBT_STORE)
            check(_lanes(t1(end - 2), [t1(end - 2)], 3), src, Cause.RBT_STORE)
            # just outside: the last bytes below it, the first byte above it
            for size_log2 in range(4):
                check(_lanes(t1(rbt - (1 << size_log2)), [t1(rbt - (1 << size_log2)), t1(end)], size_log2),
                      src, Cause.NONE)
            # loads from the table pass (Type 1), inactive lanes in it do not count
            check(_lanes(t1(rbt), [t1(rbt + 16 * k) for k in range(4)], 2, store=False), src, Cause.NONE)
            check(_lanes(t1(rbt - 64), [t1(rbt - 64), t1(rbt)], 2, mask=0x5555_5555 & FULL), src, Cause.NONE)
            # a lane of invalid type (or of another type) is cause 5 before cause 6
            check(_lanes(t1(rbt), [t1(rbt), pointer(3, rbt + 16)]), src, Cause.POINTER_TYPE)
            check(_lanes(p, [with_addr(p, rbt), t1(rbt + 16)]), src, Cause.POINTER_TYPE)
            # a mixed warp: in-bounds lanes of the buffer, two lanes into the table
            ptrs = [la.ptr("buf", 4 * k) for k in range(LANES)]
            ptrs[5], ptrs[9] = with_addr(p, rbt + 48), with_addr(p, rbt + 16)
            check(_lanes(p, ptrs), src, Cause.RBT_STORE)
    # the retired slot's table and a buffer's own bytes: not protected / in bounds
    gone = launches[SLOTS - 1].rbt_base
    check(_lanes(t1_pointer(gone), [t1_pointer(gone + 16 * k) for k in range(8)]), 0, Cause.NONE)
    check(_contig(launches[0], "buf", 0, store=True), 0, Cause.NONE)
    check(_lanes(t3_pointer(pointer_addr(launches[1].ptr("t3")), 12),
                 [launches[1].ptr("t3", 4 * k) for k in range(LANES)]), 1, Cause.NONE)
    await tb.check_state("rbt stores")
    wrong = [(r.tag, r.cause, c) for r, c in expected if r.cause is not c]
    assert not wrong, f"model causes differ from the hand-written ones (tag, model, hand): {wrong[:4]}"
    # the logged lane of the mixed warp: the lowest-address lane into the table
    mixed = [r for r, c in expected if c is Cause.RBT_STORE and len(r.uops[0].lanes) == 2]
    assert mixed and all(r.lane == 9 for r in mixed), [r.lane for r in mixed[:3]]
    bad = [r.tag for _, r, _ in tb.results if not r.ok]
    assert tb.exc_tags == (bad if precise else [])


@cocotb.test()
async def inactive_slots(dut):
    """After reset no slot is active: every request with an active lane fails with cause 3
    (no lookup, no fetch), whatever its pointers; a request with no active lane passes.
    A launched slot checks, the others keep failing; a retired slot fails again; each
    failure goes to its slot's log."""
    tb = BcuTB(dut, mem_latency=(1, 4))
    await tb.reset()
    drv = tb.driver()
    drv.alloc_global("a", 1024)
    la = drv.launch(slot=0)
    good = _contig(la, "a", 0)
    kinds = [good, _lanes(t1_pointer(0x1000), [t1_pointer(0x1000)], store=False),
             _lanes(t3_pointer(0x4000, 12), [t3_pointer(0x4000, 12)], store=False),
             _lanes(pointer(3, 0x10), [pointer(3, 0x10)], store=False),
             _lanes(t1_pointer(la.rbt_base), [t1_pointer(la.rbt_base)])]
    for s in range(SLOTS):
        for r in kinds:
            res = tb.submit(WarpRequest(r.base, r.addrs, r.mask, r.size_log2, r.store), s)
            assert (res.ok, res.cause) == (False, Cause.KERNEL), res
        assert tb.submit(WarpRequest(good.base, good.addrs, 0), s).ok
    await tb.check_state("nothing launched")
    assert tb.model.misses == 0 and all(st.log_count == len(kinds) for st in tb.model.slots)
    await tb.launch(la)
    for s in range(SLOTS):
        res = tb.submit(_contig(la, "a", 0), s)
        assert res.ok == (s == 0), (s, res)
    await tb.check_state("slot 0 launched")
    await tb.retire(0)
    res = tb.submit(_contig(la, "a", 0), 0)
    assert (res.ok, res.cause) == (False, Cause.KERNEL)
    await tb.check_state("slot 0 retired")
    await ReadOnly()
    assert int(getattr(dut, slot_port("log_count", 0)).value) == 1, "slot 0's log: the failure after its retire"
    await RisingEdge(tb.clk)


@cocotb.test()
async def every_cause_at_every_level(dut):
    """On every slot (all active), each outcome of a Type 2 lookup (pass, out of bounds,
    store to a read-only buffer, an entry of another kernel, an invalid entry) answered
    from memory (first use of its id), from L1 (the same request again) and from L2 (after
    more other ids than L1 has ways); a Type 3 warp that passes and a warp whose base is of
    the invalid type (cause 5). The levels and causes are asserted by hand as well as
    against the model (functional coverage: ``bcu_check``'s pointer type × level × cause
    and slot × level)."""
    tb = BcuTB(dut, mem_latency=(1, 6))
    tb.set_stalls(idle=0.1, stall=0.1)
    await tb.reset()
    fillers = [f"f{i}" for i in range(L1_ENTRIES + 2)]
    launches = []
    for s in range(SLOTS):
        drv = tb.driver(context=s)
        drv.alloc_global("rw", 4096)
        drv.alloc_global("ob", 4096)          # an id of its own: first looked up out of bounds
        drv.alloc_global("ro", 4096, read_only=True)
        for name in fillers:
            drv.alloc_global(name, 256)
        drv.alloc_t3("t3", 12)
        launches.append(drv.launch(slot=s))
        await tb.launch(launches[-1])
    wrong = []
    for s, la in enumerate(launches):
        used = {b.id for b in la.buffers.values() if b.kind != "t3"}
        other_id, invalid_id = [i for i in range(1, 1 << ID_BITS) if i not in used][:2]
        rw = la.buffers["rw"]
        # an entry of another kernel (valid, this buffer's bounds), written by hand into the
        # slot's RBT; the invalid id's entry is never written (zero: valid bit clear)
        tb.mem.write128(la.rbt_base + RBT_ENTRY_BYTES * other_id,
                        pack_entry(rw.base, rw.size, 1, 0, (la.kernel_id + 1) % (1 << KERNEL_ID_BITS)))
        cases = [(_contig(la, "rw", 0), Cause.NONE),
                 (_contig(la, "ob", la.buffers["ob"].size - 4 * LANES + 4), Cause.OUT_OF_BOUNDS),
                 (_contig(la, "ro", 0, store=True), Cause.READ_ONLY)]
        for i, cause in ((other_id, Cause.KERNEL), (invalid_id, Cause.INVALID_ENTRY)):
            p = t2_pointer(rw.base, encrypt_id(i, la.id_key))
            cases.append((_lanes(p, [with_addr(p, rw.base + 4 * k) for k in range(LANES)], store=False), cause))
        for req, cause in cases:
            got = [tb.submit(WarpRequest(req.base, req.addrs, req.mask, req.size_log2, req.store), s)
                   for _ in range(2)]
            for name in fillers:
                tb.submit(_contig(la, name, 0), s)
            got.append(tb.submit(WarpRequest(req.base, req.addrs, req.mask, req.size_log2, req.store), s))
            levels = [r.uops[0].level for r in got]
            if levels != ["mem", "L1", "L2"] or any(r.cause is not cause for r in got):
                wrong.append((s, cause.name, levels, [r.cause.name for r in got]))
        t3 = tb.submit(_contig(la, "t3", 0), s)
        bad_base = tb.submit(_lanes(pointer(3, rw.base), [pointer(3, rw.base)], store=False), s)
        if (t3.ok, bad_base.cause) != (True, Cause.POINTER_TYPE):
            wrong.append((s, "t3 pass / invalid base", t3, bad_base))
    assert not wrong, f"model levels/causes differ from the hand-written ones (slot, cause, levels): {wrong[:4]}"
    await tb.check_state("every cause at every level")


def test_bcu_slots():
    """pytest entry: the kernel-slot and RBT-protection regression of bcu on Verilator."""
    from tb.common.sim import run

    run("bcu", "tb.gpushield.test_slots")
