"""Unit tests of the register-map helper (hw/csr) and of the ``bcu_csr`` wrapper, on the
Amaranth simulator; and the check that docs/gpushield.md carries the generated register
table."""
import json
import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from hw.csr import Access, Bridge, Field, Register, RegisterFile, RegisterMap, Signature
from hw.gpushield import BCUCSR
from hw.gpushield.csr import BANK_BYTES, DOC, DOC_BEGIN, DOC_END, doc_table, register_map
from hw.gpushield.layout import MAX_SLOTS, RBT_BYTES, Cause
from sw.gpushield.driver import Driver, run_amaranth_sim
from sw.gpushield.model import BCUModel, WarpRequest, t1_pointer

R, W, RW, W1C, WO = Access.R, Access.W, Access.RW, Access.W1C, Access.WO


def demo_map():
    return RegisterMap("demo", [
        Register(0x0, "CTRL", "control", [Field("en", 1, RW, reset=1), Field("go", 1, W),
                                          Field("mode", 3, RW, offset=4, reset=5)]),
        Register(0x4, "STATUS", "status", [Field("busy", 1, R), Field("err", 2, W1C)]),
        Register(0x8, "KEY", "secret", [Field("key", 32, WO)]),
        Register(0xC, "TRUST", "lock", [Field("trusted", 1, RW)]),
    ])


# ---------------------------------------------------------------------------- the map
def test_map_validation():
    with pytest.raises(ValueError):
        Register(0, "A", "", [Field("x", 4, RW), Field("y", 4, RW, offset=2)])     # overlap
    with pytest.raises(ValueError):
        RegisterMap("m", [Register(2, "A", "", [Field("x", 1, RW)])])              # misaligned
    with pytest.raises(ValueError):
        RegisterMap("m", [Register(0, "A", "", [Field("x", 33, RW)])])             # too wide
    with pytest.raises(ValueError):
        RegisterMap("m", [Register(0, "A", "", [Field("x", 1, RW)]),
                          Register(0, "B", "", [Field("x", 1, RW)])])              # same address
    with pytest.raises(ValueError):
        RegisterMap("m", [Register(0, "A", "", [Field("x", 1, RW)]),
                          Register(4, "A", "", [Field("x", 1, RW)])])              # same name
    with pytest.raises(ValueError):
        Field("x", 2, RW, reset=4)
    with pytest.raises(ValueError):
        Field("x", 1, R, reset=1)                                                   # R has no reset
    with pytest.raises(TypeError):
        Field("x", 1, "RW")
    with pytest.raises(ValueError):
        RegisterMap("m", [Register(0x40, "A", "", [Field("x", 1, RW)])], addr_width=4)
    m = demo_map()
    assert m.addr_width == 4 and m["CTRL"].reset == 0x51 and m["CTRL"].field("mode").bits == "6:4"


def test_docs_generated():
    m = demo_map()
    md = m.markdown()
    assert "| 0x04 | STATUS | 0x00000000 | status |" in md
    assert "| 2:1 | err | W1C | 0x0 |" in md and "| 0 | busy | R | — |" in md
    d = json.loads(m.to_json())
    assert [r["name"] for r in d["registers"]] == ["CTRL", "STATUS", "KEY", "TRUST"]
    assert d["registers"][0]["fields"][2] == {"name": "mode", "offset": 4, "width": 3,
                                               "access": "RW", "reset": 5, "desc": ""}


def test_gpushield_doc_has_generated_table():
    """docs/gpushield.md carries exactly the table generated from the code
    (regenerate with `python -m scripts.gen_docs`)."""
    doc = DOC.read_text()
    start, end = doc.index(DOC_BEGIN), doc.index(DOC_END) + len(DOC_END)
    assert doc[start:end] == doc_table(), "docs/gpushield.md is stale: run python -m scripts.gen_docs"


# ---------------------------------------------------------------------------- bus helpers
class Bus:
    def __init__(self, ctx, port):
        self.ctx, self.port = ctx, port

    async def write(self, addr, value):
        c, p = self.ctx, self.port
        c.set(p.addr, addr)
        c.set(p.w_data, value)
        c.set(p.w_stb, 1)
        await c.tick()
        c.set(p.w_stb, 0)

    async def read(self, addr):
        c, p = self.ctx, self.port
        c.set(p.addr, addr)
        c.set(p.r_stb, 1)
        await c.tick()
        c.set(p.r_stb, 0)
        return c.get(p.r_data)


def test_register_file_two_ports():
    """R, W, RW, W1C, WO behaviour; two ports with a write-permission hook on one (the SXP
    host/CCU pattern: once TRUST.trusted is set, the host port can write nothing but
    STATUS); same-cycle writes: the first port wins."""
    regmap = demo_map()
    rf = RegisterFile(regmap, ports=("ccu", "host"), write_allowed={
        "host": lambda rf, reg: True if reg.name == "STATUS" else ~rf["TRUST"]["trusted"].q})
    busy, set_err = rf["STATUS"]["busy"].r, rf["STATUS"]["err"].set
    go_seen = []

    async def bench(ctx):
        host, ccu = Bus(ctx, rf.host), Bus(ctx, rf.ccu)
        assert await host.read(0x0) == 0x51                 # reset values
        ctx.set(busy, 1)
        assert await host.read(0x4) == 1
        await host.write(0x0, 0b1100010)                    # en=0, go=1, mode=6
        assert await ccu.read(0x0) == 0x60                  # go reads 0
        await host.write(0x8, 0xDEADBEEF)
        assert ctx.get(rf["KEY"]["key"].q) == 0xDEADBEEF and await host.read(0x8) == 0
        ctx.set(set_err, 0b10)
        await ctx.tick()
        ctx.set(set_err, 0)
        assert await host.read(0x4) == 0b101
        await host.write(0x4, 0b100)                        # W1C
        assert await host.read(0x4) == 0b001
        assert await host.read(0x3C) == 0                   # unmapped
        await ccu.write(0xC, 1)                             # lock the host out
        await host.write(0x8, 0x1234)
        assert ctx.get(rf["KEY"]["key"].q) == 0xDEADBEEF
        assert ctx.get(rf.bridges["host"].denied) == 0      # the pulse was last cycle
        await ccu.write(0x8, 0x1234)
        assert ctx.get(rf["KEY"]["key"].q) == 0x1234
        await ccu.write(0xC, 0)
        # both ports write CTRL in one cycle: ccu (listed first) wins
        for bus, v in ((rf.ccu, 0x10), (rf.host, 0x20)):
            ctx.set(bus.addr, 0)
            ctx.set(bus.w_data, v)
            ctx.set(bus.w_stb, 1)
        await ctx.tick()
        for bus in (rf.ccu, rf.host):
            ctx.set(bus.w_stb, 0)
        assert await host.read(0) == 0x10

    async def watch(ctx):
        async for _, _, stb, data in ctx.tick().sample(rf["CTRL"]["go"].stb, rf["CTRL"]["go"].data):
            if stb:
                go_seen.append(data)

    sim = Simulator(rf)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(watch)
    sim.run_until(2e-6)
    assert go_seen == [1, 0]


def test_bridge_alone():
    regmap = RegisterMap("one", [Register(0, "A", "", [Field("x", 8, R)])])
    m = Module()
    m.submodules.b = b = Bridge(regmap)
    m.d.comb += b.read["A"].eq(0x5A)

    async def bench(ctx):
        assert await Bus(ctx, b.bus).read(0) == 0x5A
        await Bus(ctx, b.bus).write(0, 1)
        assert ctx.get(b.write["A"]) == 0

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert Signature(8) == Signature(8) and Signature(8) != Signature(9)


# ---------------------------------------------------------------------------- bcu_csr
def test_bcu_csr():
    """The wrapper on 2 lanes: configure over the CSR port, launch, one good and one bad
    request (each an RBT fetch, then an L1 hit), read log and counters back; the key
    reads as zero; STATUS.exc / irq in precise mode."""
    lanes = 2
    dut = BCUCSR(lanes)
    regs = {r.name: r.addr for r in register_map(lanes)}
    rng = random.Random(3)
    drv = Driver(rng, lanes=lanes)
    drv.alloc_global("a", 256)
    launch = drv.launch()
    model = BCUModel(drv.mem.read128, lanes)
    model.rbt_base, model.kernel_id, model.id_key, model.precise = (
        launch.rbt_base, launch.kernel_id, launch.id_key, True)
    model.launch()
    reqs = [WarpRequest(launch.ptr("a"), [launch.ptr("a", 0), launch.ptr("a", 252)], 3, 2, False, 1),
            WarpRequest(launch.ptr("a"), [launch.ptr("a", 4), launch.ptr("a", 253)], 3, 2, True, 2),
            WarpRequest(launch.ptr("a"), [launch.ptr("a", 8), launch.ptr("a", 12)], 3, 2, False, 3)]
    want = [model.check(r) for r in reqs]
    got = []

    async def bench(ctx):
        bus = Bus(ctx, dut.csr)
        await bus.write(regs["RBT_BASE_LO"], launch.rbt_base & 0xFFFFFFFF)
        await bus.write(regs["RBT_BASE_HI"], launch.rbt_base >> 32)
        await bus.write(regs["KERNEL_ID"], launch.kernel_id)
        await bus.write(regs["ID_KEY_LO"], launch.id_key & 0xFFFFFFFF)
        await bus.write(regs["ID_KEY_HI"], launch.id_key >> 32)
        assert await bus.read(regs["ID_KEY_LO"]) == 0 and await bus.read(regs["ID_KEY_HI"]) == 0
        assert await bus.read(regs["KERNEL_ID"]) == launch.kernel_id
        await bus.write(regs["CTRL"], 0b111)                # precise, launch, irq_en
        assert await bus.read(regs["CTRL"]) == 0b101
        ctx.set(dut.resp.ready, 1)
        for r in reqs:
            ctx.set(dut.req.payload.as_value(), r.pack(lanes))
            ctx.set(dut.req.valid, 1)
            await ctx.tick().until(dut.req.ready)
        ctx.set(dut.req.valid, 0)
        for _ in range(30):
            await ctx.tick()
        assert ctx.get(dut.irq) == 1
        assert await bus.read(regs["LOG_COUNT"]) == 1
        info = await bus.read(regs["LOG_INFO"])
        assert (info & 0xFFFF, (info >> 16) & 7, info >> 19) == (2, Cause.OUT_OF_BOUNDS.value, 1)
        addr = await bus.read(regs["LOG_ADDR_LO"]) | await bus.read(regs["LOG_ADDR_HI"]) << 32
        assert addr == launch.buffers["a"].base + 253
        assert [await bus.read(regs[n]) for n in ("L1_HITS", "L2_HITS", "MISSES")] == [2, 0, 1]
        assert await bus.read(regs["STATUS"]) == 1
        await bus.write(regs["STATUS"], 1)
        assert await bus.read(regs["STATUS"]) == 0 and ctx.get(dut.irq) == 0
        await bus.write(regs["CTRL"], 0b010)               # launch again: log cleared
        assert await bus.read(regs["LOG_COUNT"]) == 0

    run_amaranth_sim(dut, bench, drv.mem, got)
    assert [(g["tag"], g["ok"], g["cause"]) for g in got] == [
        (w.tag, int(w.ok), w.cause.value) for w in want]
    assert [w.ok for w in want] == [True, False, True]


def test_bcu_csr_map_per_slot():
    """Slot s's bank repeats slot 0's offsets at s * 0x40 (the map of the single-kernel unit
    is unchanged at 0x00..0x34); slots that do not exist have no bank."""
    full = {r.name: r.addr for r in register_map(32, MAX_SLOTS)}
    for name in ("KERNEL_ID", "RBT_BASE_LO", "RBT_BASE_HI", "ID_KEY_LO", "ID_KEY_HI", "LOG_COUNT",
                 "LOG_INFO", "LOG_ADDR_LO", "LOG_ADDR_HI"):
        assert [full[name if s == 0 else f"S{s}_{name}"] for s in range(MAX_SLOTS)] == [
            full[name] + s * BANK_BYTES for s in range(MAX_SLOTS)], name
    assert [full[f"S{s}_CTRL"] for s in range(1, MAX_SLOTS)] == [0x40, 0x80, 0xC0]
    assert (full["CTRL"], full["STATUS"], full["L1_HITS"], full["MISSES"], full["SLOTS"]) == (0, 0x18, 0x2C, 0x34, 0x38)
    two = {r.name for r in register_map(32, 2)}
    assert "S1_KERNEL_ID" in two and not any(n.startswith(("S2_", "S3_")) for n in two)
    with pytest.raises(ValueError):
        register_map(32, 0)
    with pytest.raises(ValueError):
        register_map(32, MAX_SLOTS + 1)


def test_bcu_csr_slots():
    """Two kernels on slots 0 and 2 of a 3-slot unit, configured and launched through their
    banks: each one's requests checked against its own RBT (a pointer of one kernel used on
    the other's slot fails), a store into slot 2's RBT fails with cause 6 whatever slot it
    comes from, a request on slot 1 (never launched) fails with cause 3, each failure in its
    own slot's log (a request on slot 3, which does not exist, fails with cause 3 and is in
    no log); SLOTS shows the active slots; retire makes slot 2 inactive, a launch of
    slot 2 clears only its log. Every answer against the model."""
    lanes, slots = 2, 3
    dut = BCUCSR(lanes, slots)
    regs = {r.name: r.addr for r in register_map(lanes, slots)}
    rng = random.Random(5)
    drv = Driver(rng, lanes=lanes, slots=slots)
    drv.alloc_global("a", 256)
    drv.alloc_global("b", 512, read_only=True)
    la = drv.launch(slot=0, names=["a"])
    lb = drv.launch(slot=2, names=["b"])
    model = BCUModel(drv.mem.read128, lanes, slots)
    for launch in (la, lb):
        st = model.slots[launch.slot]
        st.rbt_base, st.kernel_id, st.id_key = launch.rbt_base, launch.kernel_id, launch.id_key
        model.launch(launch.slot)

    def warp(launch, name, offs, store=False, tag=0):
        return WarpRequest(launch.ptr(name), [launch.ptr(name, o) for o in offs], 3, 2, store, tag)

    rbt_b = t1_pointer(lb.rbt_base + 16 * 7)
    reqs = [(0, warp(la, "a", [0, 252], tag=1)),
            (2, warp(lb, "b", [0, 508], tag=2)),
            (2, warp(la, "a", [0, 4], tag=3)),                          # a's pointer on b's slot
            (0, WarpRequest(rbt_b, [rbt_b, t1_pointer(lb.rbt_base + RBT_BYTES)], 3, 2, True, 4)),
            (2, warp(lb, "b", [4, 8], store=True, tag=5)),              # read-only
            (1, warp(la, "a", [0, 4], tag=6)),                          # slot 1 not active
            (3, warp(la, "a", [0, 4], tag=8)),                          # no slot 3: no log has it
            (0, warp(la, "a", [8, 12], tag=7))]
    want = [model.check(r, slot) for slot, r in reqs]
    got = []
    logs = {}

    async def bench(ctx):
        bus = Bus(ctx, dut.csr)
        for launch in (la, lb):
            bank = "" if launch.slot == 0 else f"S{launch.slot}_"
            await bus.write(regs[f"{bank}RBT_BASE_LO"], launch.rbt_base & 0xFFFFFFFF)
            await bus.write(regs[f"{bank}RBT_BASE_HI"], launch.rbt_base >> 32)
            await bus.write(regs[f"{bank}KERNEL_ID"], launch.kernel_id)
            await bus.write(regs[f"{bank}ID_KEY_LO"], launch.id_key & 0xFFFFFFFF)
            await bus.write(regs[f"{bank}ID_KEY_HI"], launch.id_key >> 32)
        assert await bus.read(regs["S2_KERNEL_ID"]) == lb.kernel_id
        assert await bus.read(regs["S2_ID_KEY_LO"]) == 0
        await bus.write(regs["CTRL"], 0b010)                # launch slot 0
        await bus.write(regs["S2_CTRL"], 0b010)             # launch slot 2
        assert await bus.read(regs["SLOTS"]) == 0b101 << 8 | slots
        ctx.set(dut.resp.ready, 1)
        for slot, r in reqs:
            ctx.set(dut.req.payload.as_value(), r.pack(lanes))
            ctx.set(dut.req_slot, slot)
            ctx.set(dut.req.valid, 1)
            await ctx.tick().until(dut.req.ready)
        ctx.set(dut.req.valid, 0)
        for _ in range(40):
            await ctx.tick()
        for s, bank in ((0, ""), (1, "S1_"), (2, "S2_")):
            info = await bus.read(regs[f"{bank}LOG_INFO"])
            addr = await bus.read(regs[f"{bank}LOG_ADDR_LO"]) | await bus.read(regs[f"{bank}LOG_ADDR_HI"]) << 32
            logs[s] = (await bus.read(regs[f"{bank}LOG_COUNT"]), info & 0xFFFF, (info >> 16) & 7, info >> 19, addr)
        await bus.write(regs["S2_CTRL"], 0b1000)            # retire slot 2
        assert await bus.read(regs["SLOTS"]) == 0b001 << 8 | slots
        await bus.write(regs["S2_CTRL"], 0b0010)            # launch slot 2 again: its log only
        assert await bus.read(regs["S2_LOG_COUNT"]) == 0
        assert await bus.read(regs["LOG_COUNT"]) == logs[0][0] and await bus.read(regs["S1_LOG_COUNT"]) == 1

    run_amaranth_sim(dut, bench, drv.mem, got)
    assert [(g["tag"], g["ok"], g["cause"]) for g in got] == [
        (w.tag, int(w.ok), w.cause.value) for w in want]
    # independent of the model: the causes written down by hand
    assert [w.cause for n, w in enumerate(want) if n != 2] == [
        Cause.NONE, Cause.NONE, Cause.RBT_STORE, Cause.READ_ONLY, Cause.KERNEL, Cause.KERNEL, Cause.NONE]
    # a's id under b's key: an invalid entry of b's table, or (1 in 16,384) b's entry, which
    # does not hold a's address
    assert want[2].cause in (Cause.INVALID_ENTRY, Cause.OUT_OF_BOUNDS)
    for s in range(slots):
        st = model.slots[s]
        tag, cause, lane, addr = st.log_first
        assert logs[s] == (st.log_count, tag, cause.value, lane, addr), (s, logs[s], st)
    assert [logs[s][:3] for s in range(slots)] == [(1, 4, 6), (1, 6, 3), (2, 3, want[2].cause.value)]
