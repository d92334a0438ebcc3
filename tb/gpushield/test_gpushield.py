"""cocotb regression of ``bcu`` (hw/gpushield) against the golden model (sw/gpushield/model.py).

Every response (tag, ok, cause), every RBT fetch address, every ``exc`` pulse, and at
checkpoints the violation log and the L1/L2/miss counters are compared with the model
(see tb/gpushield/env.py); the model is checked on its own in sw/gpushield/test_model.py.
"""
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gpushield.core import BCU, L1_CYCLES, L2_CYCLES, MAX_FETCHES, QUEUE_DEPTH, pipeline_depth
from hw.gpushield.front import front_registers
from hw.gpushield.layout import Cause
from sw.gpushield.model import WarpRequest, decrypt_id, pointer, pointer_addr, pointer_eid, t1_pointer, with_addr
from sw.gpushield.timing import answer_cycles
from sw.gpushield.traces import KERNELS, VIOLATIONS, kernel, to_request, violations
from tb.common.scrub import Refusals, Scanner, bytes_secret
from tb.gpushield.env import LANES, BcuTB

FULL = (1 << LANES) - 1
SCRUB = BCU(LANES).scrub_cycles     # req refused after reset (the RTL's own)


@cocotb.test()
@cocotb.parametrize(stalls=["none", "idle_and_backpressure"])
async def traces_no_false_positive(dut, stalls):
    """Every kernel trace (streaming, strided, stencil, matmul, gather/scatter, BFS,
    many buffers, per-thread locals, pointer arrays, heap, Type 3): every access is in
    bounds, so every response must be ok, and each one equals the model's."""
    tb = BcuTB(dut, mem_latency=(2, 30))
    if stalls != "none":
        tb.set_stalls(idle=0.3, stall=0.3, mem_stall=0.3, mem_idle=0.3)
    await tb.reset()
    for name in sorted(KERNELS):
        before = len(tb.results)
        await tb.run_kernel(name)
        bad = [r for _, r, _ in tb.results[before:] if not r.ok]
        assert not bad, f"{name}: model reports false positives {bad[:2]}"
        await tb.check_state(name)
        tb.log.info("%s: %d requests ok (L1 %d, L2 %d, misses %d so far)", name,
                    len(tb.results) - before, tb.model.l1_hits, tb.model.l2_hits, tb.model.misses)


async def _violation_rounds(tb, rounds, precise):
    """Launch twice per round; inject every kind of violation between in-bounds traffic."""
    caught = {k: 0 for k in VIOLATIONS}
    drv = tb.driver()
    for name, (size, ro) in {"x": (4096, False), "y": (8192, True), "z": (2048, False),
                             "w": (100_000, False)}.items():
        drv.alloc_global(name, size, read_only=ro)
    drv.alloc_t3("t", 12)
    ok_ops = list(kernel("streaming", drv, n=256).ops())
    prev = drv.launch()
    for r in range(rounds):
        launch = drv.launch()
        await tb.launch(launch, precise)
        injected = []
        for kind, req, cause in violations(launch, prev, random):
            for op in random.sample(ok_ops, 3):
                tb.submit(to_request(op, launch, lanes=tb.lanes))
            res = tb.submit(req)
            assert not res.ok, f"model misses violation {kind}"
            assert cause is None or res.cause is cause, f"{kind}: model cause {res.cause}, expected {cause}"
            injected.append(res.tag)
            caught[kind] += 1
        await tb.drain()
        await tb.check_state(f"round {r}")
        # the first violation of the launch is in the log
        assert tb.model.log_first[0] == injected[0]
        prev = launch
    return caught


@cocotb.test()
@cocotb.parametrize(precise=[False, True])
async def violations_caught(dut, precise):
    """Adjacent overflow by one byte, far overflow over other buffers, underflow, store to
    read-only, stale pointer (previous launch's key and kernel id), an id of an earlier
    kernel under the new key, forged id bits, invalid type, type mismatch, Type 3 outside
    its block, a mixed-id warp with one bad lane: each caught with the model's cause. In
    precise mode ``exc`` pulses with each failing response (its tag), in logging mode never;
    both keep log_first / log_count. Responses are back-pressured."""
    tb = BcuTB(dut, mem_latency=(1, 12))
    tb.set_stalls(idle=0.2, stall=0.3)
    await tb.reset()
    caught = await _violation_rounds(tb, 4, precise)
    assert all(caught.values()), caught
    if precise:
        assert tb.exc_tags == [r.tag for _, r, _ in tb.results if not r.ok]
    else:
        assert not tb.exc_tags


@cocotb.test()
async def exc_pulse_is_one_cycle(dut):
    """Precise mode with the response held back: ``exc`` rises only in the cycle the failing
    response is taken, for exactly one cycle, and log_first keeps the first violation."""
    tb = BcuTB(dut)
    await tb.reset()
    drv = tb.driver()
    drv.alloc_global("a", 1024)
    launch = drv.launch()
    await tb.launch(launch, precise=True)
    tb.resp.enabled = False
    reqs = [WarpRequest(launch.ptr("a"), [launch.ptr("a", 1024 + 4 * k) for k in range(LANES)], FULL),
            WarpRequest(launch.ptr("a"), [launch.ptr("a", 4 * k) for k in range(LANES)], FULL),
            WarpRequest(launch.ptr("a"), [launch.ptr("a", -4 * k) for k in range(LANES)], FULL, store=True)]
    for r in reqs:
        tb.submit(r)
    high = 0
    for _ in range(60):
        await RisingEdge(tb.clk)
        await ReadOnly()
        high += int(dut.exc.value)
    assert high == 0, "exc while the failing response was not taken"
    assert int(dut.resp__valid.value) == 1
    await RisingEdge(tb.clk)
    tb.resp.enabled = True
    await tb.drain()
    await tb.check_state("exc")
    assert tb.exc_tags == [reqs[0].tag, reqs[2].tag]
    v = drv.read_log(int(dut.log_first.value), int(dut.log_count.value))
    # an overflow logs the highest lane (the one that went furthest)
    assert (v.count, v.tag, v.cause, v.lane, v.addr) == (
        2, reqs[0].tag, Cause.OUT_OF_BOUNDS, LANES - 1, launch.buffers["a"].base + 1024 + 4 * (LANES - 1))


@cocotb.test()
async def launch_flushes(dut):
    """A launch flushes both RCaches (everything misses again, with the new key's ids),
    clears the log, and pointers of the previous launch now fail."""
    tb = BcuTB(dut, mem_latency=(3, 8))
    await tb.reset()
    drv = tb.driver()
    k = kernel("many_buffers", drv)
    ops = list(k.ops())
    first = drv.launch()
    await tb.launch(first)
    tb.submit_ops(ops[:40], first)
    tb.submit(WarpRequest(first.ptr("out"), [first.ptr("out", -4)] * LANES, 1))   # one violation
    await tb.check_state("first launch")
    assert tb.model.misses == 9 and tb.model.log_count == 1
    second = drv.launch()
    await tb.launch(second)
    await ReadOnly()
    assert int(dut.log_count.value) == 0 and int(dut.log_first.value) == 0, "log not cleared by launch"
    misses = tb.model.misses
    tb.submit_ops(ops[:40], second)
    await tb.check_state("second launch")
    assert tb.model.misses - misses == 9, "caches not flushed by launch"
    # the first launch's pointers are stale now (unless an old encrypted id happens to
    # decrypt to the same buffer's new id under the new key: 1 in 16,384)
    for op in ops[:9]:
        old = pointer_eid(first.pointers[op.base])
        if decrypt_id(old, second.id_key) == second.buffers[op.base].id:
            continue
        res = tb.submit(to_request(op, first, lanes=tb.lanes))
        assert not res.ok
    await tb.check_state("stale pointers")


@cocotb.test()
async def memory_latency_and_backpressure(dut):
    """Many RBT fetches (local arrays, pointer arrays, many buffers, gather) with random
    memory latency 1..60 cycles and random back-pressure on mem_req and idle mem_resp."""
    tb = BcuTB(dut, mem_latency=(1, 60))
    tb.set_stalls(idle=0.1, stall=0.2, mem_stall=0.5, mem_idle=0.5)
    await tb.reset()
    for name in ("local", "mixed_ids", "many_buffers"):
        await tb.run_kernel(name)
        await tb.check_state(name)
    assert tb.model.misses > 60 and max(tb.mem_turnaround) > 30
    tb.log.info("%d fetches, turnaround %d..%d cycles", len(tb.mem_turnaround),
                min(tb.mem_turnaround), max(tb.mem_turnaround))


@cocotb.test()
async def mixed_id_warps(dut):
    """Warps whose lanes carry 1..32 different ids (random buffers, offsets near both
    ends, random masks and access sizes), some with one out-of-bounds lane: each lane is
    checked against its own entry."""
    tb = BcuTB(dut, mem_latency=(1, 6))
    tb.set_stalls(idle=0.2, stall=0.2)
    await tb.reset()
    drv = tb.driver()
    names = [f"b{i}" for i in range(40)]
    for n in names:
        drv.alloc_global(n, random.choice([64, 200, 1000, 5000]), gap=random.choice([0, 16, 4096]))
    launch = drv.launch()
    await tb.launch(launch)
    bad = 0
    for _ in range(400):
        ids = random.choice([1, 2, 3, 5, 8, 32])
        pick = random.sample(names, min(ids, len(names)))
        size_log2 = random.randrange(4)
        addrs = []
        for k in range(LANES):
            b = launch.buffers[pick[k % len(pick)]]
            top = b.size - (1 << size_log2)
            addrs.append(launch.ptr(b.name, random.choice([0, top, random.randrange(top + 1)])))
        if random.random() < 0.3:
            k = random.randrange(LANES)
            b = launch.buffers[pick[k % len(pick)]]
            addrs[k] = launch.ptr(b.name, random.choice([-1, b.size - (1 << size_log2) + 1,
                                                         b.size + 4096]))
        mask = FULL if random.random() < 0.6 else random.getrandbits(LANES)
        res = tb.submit(WarpRequest(addrs[0], addrs, mask, size_log2, random.random() < 0.3))
        bad += not res.ok
    await tb.check_state("mixed ids")
    assert bad > 50


@cocotb.test()
async def random_fuzz(dut):
    """Random requests: any pointer type per lane (valid, forged, stale, Type 1/3, invalid
    and Type 3 with reserved bits set), random masks, sizes, stores, random launches and
    precise mode; everything against the model."""
    tb = BcuTB(dut, mem_latency=(1, 20))
    tb.set_stalls(idle=0.2, stall=0.2, mem_stall=0.3, mem_idle=0.3)
    await tb.reset()
    drv = tb.driver()
    for i in range(12):   # g0 read-only and g1 writable, the rest random
        ro = i == 0 or (i > 1 and random.random() < 0.3)
        drv.alloc_global(f"g{i}", random.randrange(16, 3000) if i > 1 else 1000, read_only=ro)
    drv.alloc_t3("t0", 8)
    drv.alloc_t3("t1", 12)
    prev = drv.launch()
    for round_ in range(6):
        launch = drv.launch(scrub=round_ % 3 == 2)
        await tb.launch(launch, precise=random.random() < 0.5)
        bufs = list(launch.buffers.values())
        for _ in range(150):
            base_buf = random.choice(bufs)
            base = launch.ptr(base_buf.name)
            addrs = []
            for _k in range(LANES):
                b = base_buf if random.random() < 0.7 else random.choice(bufs)
                p = launch.ptr(b.name, random.randrange(-16, b.size + 16))
                roll = random.random()
                if roll < 0.03:
                    p = with_addr(prev.pointers[b.name], pointer_addr(p))
                elif roll < 0.06:
                    p ^= random.getrandbits(14) << 48
                elif roll < 0.08:
                    p = pointer(random.randrange(4), pointer_addr(p), random.getrandbits(14))
                addrs.append(p)
            if random.random() < 0.1:
                base = t1_pointer(pointer_addr(base))
                addrs = [t1_pointer(pointer_addr(a)) for a in addrs]
            tb.submit(WarpRequest(base, addrs, random.getrandbits(LANES) | (random.random() < 0.5) * FULL,
                                  random.randrange(4), random.random() < 0.4))
        for _, req, _ in violations(launch, prev, random, lanes=tb.lanes):
            tb.submit(req)
        await tb.check_state(f"fuzz round {round_}")
        prev = launch
    causes = {r.cause for _, r, _ in tb.results}
    assert len(causes) == 6, f"causes seen: {causes}"


@cocotb.test()
async def latency_and_throughput(dut):
    """With ``resp`` and ``mem_req`` always ready and a fixed memory latency, every answer
    leaves in exactly the cycle that the documented timing rules (sw/gpushield/timing.py)
    give from the model's classification of each micro-op (L1 hit, L2 hit, miss, and which
    earlier miss a hit waits for) and the cycles each request was presented: L1 hits one
    warp per cycle; L2 hits one per 2 cycles; misses overlapping (four fetches back to
    back, a fifth waiting for a free fetch), hits behind a miss waiting only for its answer,
    a hit on a pending entry waiting for its fill, a full answer queue stalling E; multi-id
    warps. A request presented to an idle unit answers ``pipeline_depth`` + 1 (L1), + 2
    (L2) or + 4 + the memory turnaround (miss) cycles later."""
    tb = BcuTB(dut, mem_latency=(10, 10))
    await tb.reset()
    drv = tb.driver()
    k = kernel("matmul", drv)
    names = [f"m{i}" for i in range(6)]
    for n in names:
        drv.alloc_global(n, 4096)
    launch = drv.launch()
    await tb.launch(launch)
    used = {pointer_eid(p) for p in launch.pointers.values()}
    forged = iter(e for e in range(1, 1 << 14) if e not in used)   # ids no buffer has: misses
    index = {}                                                      # scenario -> request numbers

    def send(what, pointers):
        n = len(tb.expected) + len(tb.results)
        index.setdefault(what, []).extend(range(n, n + len(pointers)))
        for p in pointers:
            tb.submit(WarpRequest(p, [p] * LANES, FULL))

    def miss():
        return pointer(1, launch.buffers[names[0]].base, next(forged))

    ops = list(k.ops())
    tb.submit_ops(ops[:600], launch)            # warm-up misses, then L1 hits back to back
    for _ in range(4):                          # L2 hits: 6 buffers through 4 L1 ways
        send("l2", [launch.ptr(n) for n in names])
    send("burst", [miss() for _ in range(MAX_FETCHES + 1)])    # the last one waits for a fetch
    send("behind", [launch.ptr(names[0])] * 3)
    pending = miss()
    send("pending", [pending, pending, launch.ptr(names[1])])  # a hit on the pending entry
    send("full", [miss()] + [launch.ptr(names[2])] * (QUEUE_DEPTH + 4))
    for _ in range(20):                         # multi-id warps
        pick = random.sample(names, 3)
        tb.submit(WarpRequest(launch.ptr(pick[0]), [launch.ptr(pick[j % 3], 4 * j) for j in range(LANES)], FULL))
    await tb.drain()
    streamed = len(tb.results)
    # one request at a time, the unit idle before each: L1 hits, L2 hits, misses
    for p in [launch.ptr(n) for n in names * 2] + [launch.ptr(names[0])] * 2 + [miss() for _ in range(3)]:
        tb.submit(WarpRequest(p, [p] * LANES, FULL))
        await tb.drain()
    await tb.check_state("latency")
    assert set(tb.mem_turnaround) == {tb.mem_turnaround[0]}, f"memory turnaround varies: {set(tb.mem_turnaround)}"
    turn, depth = tb.mem_turnaround[0], pipeline_depth(LANES)
    want = answer_cycles([(p, r) for p, (_, r, _) in zip(tb.present, tb.results)], tb.mem_turnaround,
                         front_registers(LANES))
    wrong = [(n, got - tb.present[n], w - tb.present[n], [u.level for u in r.uops])
             for n, ((_, r, _), got, w) in enumerate(zip(tb.results, tb.answered, want)) if got != w]
    assert not wrong, (f"{len(wrong)} answers not in the cycle the timing rules give (request, RTL and "
                       f"rules' cycles from its presentation, levels): {wrong[:5]}")
    levels = {n: [u.level for u in tb.results[n][1].uops] for n in range(len(tb.results))}
    assert all(levels[n] == ["L2"] for n in index["l2"][6:]), "the L2 scenario is not all L2 hits"
    assert all(levels[n] == ["mem"] for n in index["burst"]), "the burst is not all misses"
    # the burst: the first MAX_FETCHES misses overlap (answers one cycle apart)
    burst = [tb.answered[n] for n in index["burst"]]
    assert all(b - a == 1 for a, b in zip(burst, burst[1:MAX_FETCHES])), f"misses did not overlap: {burst}"
    # L2 hits back to back, once the first round's misses have left: one per L2_CYCLES
    l2 = [tb.answered[n] for n in index["l2"][-6:]]
    assert all(b - a == L2_CYCLES for a, b in zip(l2, l2[1:])), f"L2 hits not one per {L2_CYCLES} cycles: {l2}"
    # the isolated requests: answer - presented = depth + the lone micro-op's cycles
    isolated = {}
    for (_, r, _), present, answer in zip(tb.results[streamed:], tb.present[streamed:], tb.answered[streamed:]):
        isolated.setdefault(r.uops[0].level, set()).add(answer - present)
    assert isolated == {"L1": {depth + L1_CYCLES}, "L2": {depth + L2_CYCLES},
                        "mem": {depth + 4 + turn}}, isolated
    # throughput: the L1-hit run accepted one request per cycle and answered one per cycle
    acc = tb.accepted[140:590]   # after the C tile's first (missing) store at op 128
    assert acc == list(range(acc[0], acc[0] + len(acc))), "L1 hits not accepted one per cycle"
    out = tb.answered[140:590]
    assert out == list(range(out[0], out[0] + len(out))), "L1 hits not answered one per cycle"
    tb.log.info("alone, request to answer: %s; burst of misses answered at %s",
                {k: sorted(v) for k, v in isolated.items()}, [b - burst[0] for b in burst])


async def _watch_fetches(tb, seen):
    """Every cycle: fetches outstanding (mem_req transfers not yet answered on mem_resp)
    and the lookups the engine completed while at least one was outstanding."""
    dut, outstanding = tb.dut, 0
    lookups = None
    while True:
        await RisingEdge(tb.clk)
        await ReadOnly()
        if tb.in_reset:
            outstanding, lookups = 0, None
            continue
        now = int(dut.l1_hits.value) + int(dut.l2_hits.value) + int(dut.misses.value)
        if lookups is not None and now != lookups and outstanding:
            seen["lookups_under_miss"] += now - lookups
            seen["hits_under_miss"] += (now - lookups) - (int(dut.misses.value) - seen["_misses"])
        lookups, seen["_misses"] = now, int(dut.misses.value)
        seen["max_outstanding"] = max(seen["max_outstanding"], outstanding)
        outstanding += int(dut.mem_req__valid.value) & int(dut.mem_req__ready.value)
        outstanding -= int(dut.mem_resp__valid.value) & int(dut.mem_resp__ready.value)


@cocotb.test()
async def hit_under_miss(dut):
    """Hit under miss, in order: several kernels' traces (cold misses of every buffer,
    pointer arrays, per-thread locals, many buffers) with a random memory latency of 1..100
    cycles per fetch and random back-pressure on ``req``, ``resp``, ``mem_req`` and
    ``mem_resp``. Every answer equals the model's, in request order, every RBT fetch address
    is the model's in order, the counters match; and the misses really overlap: more than
    one fetch was outstanding at once (never more than ``MAX_FETCHES``), and the engine
    completed lookups, hits among them, while fetches were outstanding."""
    tb = BcuTB(dut, mem_latency=(1, 100))
    tb.set_stalls(idle=0.2, stall=0.2, mem_stall=0.3, mem_idle=0.3)
    await tb.reset()
    seen = {"max_outstanding": 0, "lookups_under_miss": 0, "hits_under_miss": 0, "_misses": 0}
    watcher = cocotb.start_soon(_watch_fetches(tb, seen))
    for name in ("streaming", "many_buffers", "mixed_ids", "local", "gather_scatter", "heap"):
        await tb.run_kernel(name)
        await tb.check_state(name)
    watcher.cancel()
    assert 1 < seen["max_outstanding"] <= MAX_FETCHES, f"fetches outstanding at most {seen['max_outstanding']}"
    assert seen["hits_under_miss"] > 0, f"no hit completed while a fetch was outstanding: {seen}"
    assert max(tb.mem_turnaround) > 60 and tb.model.misses > 60, (max(tb.mem_turnaround), tb.model.misses)
    tb.log.info("%d requests, %d fetches (turnaround %d..%d cycles), up to %d outstanding; %d lookups "
                "(%d hits) completed under a miss", len(tb.results), tb.model.misses, min(tb.mem_turnaround),
                max(tb.mem_turnaround), seen["max_outstanding"], seen["lookups_under_miss"],
                seen["hits_under_miss"])


@cocotb.test()
async def reset_midstream(dut):
    """Reset with requests queued, a fetch outstanding and responses held: ``req`` is
    refused for exactly ``BCU.scrub_cycles`` cycles after the reset while the L2 entries
    are zeroed; afterwards no signal or memory word holds a word of a cached bound (an RBT
    entry's base and size) or of the launch's id key, every L2 entry is zero (before the
    reset, as a control, the same scan finds bounds and the key in the live unit); nothing
    from before comes out afterwards, counters and log read zero, caches are empty, and the
    unit works afterwards."""
    tb = BcuTB(dut, mem_latency=(20, 40))
    refused = Refusals(tb.clk, dut.rst, dut.req__ready)
    await tb.reset()
    got = await refused.after_reset()
    assert got == SCRUB, f"req refused for {got} cycles after the first reset, not BCU.scrub_cycles = {SCRUB}"
    # the inputs the testbench drives are left out: the trusted side owns them
    scanner = Scanner(dut, skip=("req__", "mem_resp__", "rbt_base", "kernel_id", "id_key"))
    await ReadOnly()
    scanner.baseline()
    await RisingEdge(tb.clk)
    drv = tb.driver()
    k = kernel("local", drv)
    # buffers with bounds that look like nothing else (random bases and sizes), more than
    # L1 holds, so that L2 and memory fetches hold them too
    spread = [f"spread{i}" for i in range(12)]
    for name in spread:
        drv.alloc_global(name, random.randrange(1 << 20, 1 << 32), gap=random.randrange(1 << 42))
    launch = drv.launch()
    await tb.launch(launch, precise=True)
    secrets = [bytes_secret("id key", "id key", launch.id_key.to_bytes(8, "little"))]
    secrets += [bytes_secret("bound", n, b.base.to_bytes(6, "little") + b.size.to_bytes(4, "little"))
                for n, b in launch.buffers.items()]
    for _ in range(3):
        for name in spread:
            size = launch.buffers[name].size
            offs = [random.randrange(size + 64) for _ in range(LANES)]
            tb.submit(WarpRequest(launch.ptr(name), [launch.ptr(name, o) for o in offs], FULL))
    ops = list(k.ops())
    tb.submit_ops(ops, launch)
    tb.submit(WarpRequest(launch.ptr(k.locals[0]), [launch.ptr(k.locals[0], -4)] * LANES, FULL))
    await scanner.control(secrets, tb.clk, 150, {"id key", "bound"})
    for _ in range(random.randint(50, 150)):
        await RisingEdge(tb.clk)
    for _ in range(1000):               # at least one fetch done (L2 filled)
        if int(dut.misses.value):
            break
        await RisingEdge(tb.clk)
    assert tb.expected, "everything finished before the reset"
    assert int(dut.misses.value) > 0
    await tb.do_reset()
    got = await refused.after_reset()
    assert got == SCRUB, f"req refused for {got} cycles after the reset, not BCU.scrub_cycles = {SCRUB}"
    for name in ("rbt_base", "kernel_id", "id_key"):    # the trusted side clears the config
        getattr(dut, name).value = 0
    await RisingEdge(tb.clk)
    await ReadOnly()
    for name in ("l1_hits", "l2_hits", "misses", "log_count", "log_first", "resp__valid",
                 "mem_req__valid"):
        assert int(getattr(dut, name).value) == 0, f"{name} not zero after reset"
    scan = scanner.assert_clean(secrets, "after the reset")
    assert not scan.nonzero(("l2_data",)), f"L2 entries not zero after the reset: {scan.nonzero(('l2_data',))}"
    answered = len(tb.answered)
    for _ in range(50):
        await RisingEdge(tb.clk)
    assert len(tb.answered) == answered and not tb.errors, "traffic from before the reset"
    await tb.launch(launch, precise=True)
    tb.submit_ops(ops, launch)
    await tb.check_state("after reset")
    assert tb.model.misses == 64     # caches empty after reset


def test_bcu():
    """pytest entry: the whole cocotb regression of bcu on Verilator."""
    from tb.common.sim import run

    run("bcu", "tb.gpushield.test_gpushield")
