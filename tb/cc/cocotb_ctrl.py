"""cocotb regression of ``cc_ctrl`` (hw/cc/ctrl.py). Every test runs under the per-cycle
scoreboard of :class:`tb.cc.ctrl_tb.CtrlTB` (RTL = golden model on every output, read
and response); directed tests add the properties the issue asks for, stated
independently of the model (a secret is unreadable, a refused access reads zero, …)."""
import itertools
import random

import cocotb
from cocotb.triggers import RisingEdge

from hw.cc.layout import Mode, Src
from hw.cc.regs import ALLOW, KEY_WORDS, ROWS, SCRATCH_WORDS, register_map
from tb.common.scrub import holders

from .ctrl_tb import DEPTH, PROTECTED, REG, CtrlTB

MODES = (Mode.OFF, Mode.ON, Mode.DEVTOOLS)
SKIP = ("host__", "fw__", "mem_req__")
ADDRS = sorted(REG.values()) + [0x1C, 0x3C, 0x60, 0xFC]     # mapped + a few unmapped
# The decoupler policy written out by hand (not read from hw/cc/regs.py ALLOW).
WINDOW = {"CC_MODE", "CC_MODE_SET", "CC_STATUS", "DEC_COUNT", "DEC_LOG", "FW_COUNT", "FW_LOG"}
POLICY = {Mode.OFF: set(REG), Mode.ON: WINDOW,
          Mode.DEVTOOLS: WINDOW | {"PERF_CTRL", "PERF_CYCLES", "PERF_ACCESSES"}}


async def set_mode(tb, mode):
    """Make *mode* active the documented way: write the store, then an FLR."""
    await tb.host.write(REG["CC_MODE_SET"], mode.value)
    await tb.flr()
    assert int(tb.dut.mode.value) == mode.value, f"mode {mode.name} not active after FLR"


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.4], stall=[0.0, 0.5])
async def random_regression(dut, idle, stall):
    """Random host and firmware register traffic (every address, mapped or not; mode
    writes including the invalid code), memory traffic from every initiator across the
    region boundary, FLRs at random (also during scrubs), idle cycles and back-pressure;
    the RTL must equal the model every cycle."""
    tb = CtrlTB(dut, idle, stall)
    await tb.power_on(random.choice(range(4)))
    cycles = 4000
    for _ in range(cycles):
        r = random.random()
        for port in (tb.host, tb.fw):
            if len(port.queue) < 2 and random.random() < 0.3:
                addr = random.choice(ADDRS)
                if random.random() < 0.5:
                    port.submit(False, addr)
                else:
                    data = random.randrange(4) if addr == REG["CC_MODE_SET"] else random.getrandbits(32)
                    port.submit(True, addr, data)
        if len(tb.src.queue) < 3 and random.random() < 0.5:
            addr = random.choice([random.randrange(DEPTH), PROTECTED - 1, PROTECTED % DEPTH, 0, DEPTH - 1])
            tb.mem(random.randrange(4), addr, random.getrandbits(1), random.getrandbits(128))
        if r < 0.0015:
            tb.flr_queue += 1
        await RisingEdge(tb.clk)
    # let the register ops still queued finish first: one arriving during the final FLR's
    # scrub would be refused and counted again after the FLR cleared the counter
    for _ in range(1000):
        if not (tb.host.queue or tb.fw.queue or tb.host.current or tb.fw.current):
            break
        await RisingEdge(tb.clk)
    await tb.flr()
    tb.check()
    assert tb.model.dec_count == 0, \
        f"refusal count {tb.model.dec_count} after a quiet FLR (the FLR must clear it)"
    assert tb.cycle > cycles


@cocotb.test()
async def mode_pairs_scrub(dut):
    """Every (from, to) pair of modes: secrets written in *from* (key state and scratch
    registers through the firmware port, protected and shared memory words through the
    DMA) are unreadable after the FLR into *to*: no signal holds a key word, memory reads
    back zero, registers read zero. A mode write alone changes nothing until the FLR.
    The store survives FLRs and comes back from the EEPROM at power-on."""
    tb = CtrlTB(dut)
    await tb.power_on(Mode.OFF)
    for frm, to in itertools.product(MODES, MODES):
        await set_mode(tb, frm)
        secret = random.randbytes(32)
        words = [int.from_bytes(secret[4 * k:4 * k + 4], "little") for k in range(KEY_WORDS)]
        for k, w in enumerate(words):
            await tb.fw.write(REG[f"KEY{k}"], w)
        for k in range(SCRATCH_WORDS):
            await tb.fw.write(REG[f"SCRATCH{k}"], words[k])
        addrs = [0, PROTECTED - 1, PROTECTED % DEPTH, DEPTH - 1]
        for a in addrs:
            await tb.mem_access(Src.DMA, a, 1, int.from_bytes(secret[:16], "little"))
        assert int(dut.key.value) == int.from_bytes(secret, "little"), "key state not written"
        # a mode change without reset: only the store moves
        await tb.host.write(REG["CC_MODE_SET"], to.value)
        v = await tb.host.read(REG["CC_MODE"])
        assert (v & 3, (v >> 2) & 3) == (frm.value, to.value), f"{frm.name}->{to.name}: CC_MODE {v:#x}"
        assert int(dut.mode.value) == frm.value, "mode changed without a reset"
        await tb.flr()
        assert int(dut.mode.value) == to.value, f"{frm.name}->{to.name}: mode not applied"
        found = holders(dut, [secret], skip_prefixes=SKIP)
        assert not found, f"{frm.name}->{to.name}: key words survive the FLR in {found[:5]}"
        for a in addrs:
            got = await tb.mem_access(Src.DMA, a)
            assert got["data"] == 0 and got["ok"], f"{frm.name}->{to.name}: memory word {a} = {got}"
        for k in range(SCRATCH_WORDS):
            assert await tb.fw.read(REG[f"SCRATCH{k}"]) == 0, f"SCRATCH{k} survives the FLR"
    # the store is what the board writes to the EEPROM: power-on comes back in it
    await tb.host.write(REG["CC_MODE_SET"], Mode.DEVTOOLS.value)
    await tb.power_on(tb.eeprom)
    assert int(dut.mode.value) == Mode.DEVTOOLS.value, "power-on did not load the stored mode"
    await tb.power_on(3)                      # an EEPROM code 3 is fail-secure
    assert int(dut.mode.value) == Mode.ON.value
    tb.check()


@cocotb.test()
async def decoupler(dut):
    """In each mode, every register address (and unmapped ones) read and written by the
    host: a refused read returns zero even where the register holds a value, a refused
    write changes nothing, each is counted and its address latched; the allow-list
    decides (hw/cc/regs.py ALLOW). Independently of that table, the registers the RTL
    lets the host reach (no DEC_COUNT step) must be the policy of the issue and the
    source: every register in CC off, the management window in CC on, the window and
    the performance counters in devtools (so an edit of the table that opens CC on
    fails here, not only in sw/cc)."""
    tb = CtrlTB(dut)
    await tb.power_on(Mode.OFF)
    names = {a: n for n, a in REG.items()}
    for mode in MODES:
        await set_mode(tb, mode)
        col = ROWS.index(mode)
        refused = 0
        reached = set()
        for k in range(SCRATCH_WORDS):
            await tb.fw.write(REG[f"SCRATCH{k}"], 0xA5A50000 | k)
        for addr in ADDRS:
            name = names.get(addr)
            perm = next((p[col] for key, p in ALLOW.items()
                         if name and (key == name or (key.endswith("*") and name.startswith(key[:-1])))), "-")
            if addr in (REG["CC_MODE_SET"], REG["CC_STATUS"]):
                continue                          # writes with side effects: tested elsewhere
            before = await tb.fw.read(REG["DEC_COUNT"])
            v = await tb.host.read(addr)
            if name and await tb.fw.read(REG["DEC_COUNT"]) == before:
                reached.add(name)
            if "r" not in perm:
                refused += 1
                assert v == 0, f"{mode.name}: refused read of {name or hex(addr)} returned {v:#x}"
                log = await tb.fw.read(REG["DEC_LOG"])
                assert log == addr, f"{mode.name}: DEC_LOG {log:#x} after refused read of {addr:#x}"
            elif name and name.startswith("SCRATCH"):
                assert v == 0xA5A50000 | int(name[7:]), f"{mode.name}: {name} unreadable"
            before = await tb.fw.read(REG["DEC_COUNT"])
            await tb.host.write(addr, 0x5A5A5A5A if not name or not name.startswith("PERF") else 0)
            if name and await tb.fw.read(REG["DEC_COUNT"]) == before:
                reached.add(name)
            if "w" not in perm:
                refused += 1
                log = await tb.fw.read(REG["DEC_LOG"])
                assert log == addr | 0x100, f"{mode.name}: DEC_LOG {log:#x} after refused write of {addr:#x}"
                if name and name.startswith("SCRATCH"):
                    assert await tb.fw.read(addr) == 0xA5A50000 | int(name[7:]), \
                        f"{mode.name}: a refused write changed {name}"
        count = await tb.fw.read(REG["DEC_COUNT"])
        assert count == refused, f"{mode.name}: DEC_COUNT {count}, expected {refused}"
        policy = POLICY[mode] - {"CC_MODE_SET", "CC_STATUS"}         # those two are skipped
        assert reached == policy, \
            f"{mode.name}: the host reaches {sorted(reached - policy)} beyond the policy and " \
            f"misses {sorted(policy - reached)}"
        if mode is not Mode.OFF:
            assert int(dut.key.value) == 0, f"{mode.name}: a host key write got through"
    tb.check()


@cocotb.test()
async def firewall(dut):
    """Each mode × initiator × region × read/write: the outcome the issue states (CC on
    and devtools refuse host accesses to the protected region and engine writes outside
    it, with a fault; the DMA goes anywhere; CC off refuses nothing); refusals logged."""
    tb = CtrlTB(dut, stall=0.3)
    await tb.power_on(Mode.OFF)
    for mode in MODES:
        await set_mode(tb, mode)
        refusals = 0
        for src, prot, write in itertools.product((Src.HOST, Src.DMA, Src.ENGINE), (1, 0), (1, 0)):
            addr = random.randrange(PROTECTED) if prot else random.randrange(PROTECTED, DEPTH)
            if mode is Mode.OFF:
                want = True
            elif src is Src.HOST:
                want = not prot
            elif src is Src.ENGINE:
                want = prot or not write
            else:
                want = True
            # put a known value there first (the DMA may always write)
            await tb.mem_access(Src.DMA, addr, 1, 0x1234 << 64 | addr)
            fault_before = int(dut.fault.value)
            got = await tb.mem_access(src, addr, write, 0xBAD)
            assert got["ok"] == int(want), f"{mode.name} {src.name} prot={prot} write={write}: ok={got['ok']}"
            back = await tb.mem_access(Src.DMA, addr)
            if write:
                assert back["data"] == (0xBAD if want else 0x1234 << 64 | addr), \
                    f"{mode.name} {src.name}: refused write landed" if not want else "write lost"
            else:
                assert got["data"] == (0x1234 << 64 | addr if want else 0), \
                    f"{mode.name} {src.name}: read returned {got['data']:#x}"
            if not want:
                refusals += 1
                log = await tb.fw.read(REG["FW_LOG"])
                assert log == addr | src.value << 24 | write << 28, f"FW_LOG {log:#x}"
                if src is Src.ENGINE:
                    assert int(dut.fault.value) == 1, "engine write outside: no fault"
                    await tb.fw.write(REG["CC_STATUS"], 1)
                    assert int(dut.fault.value) == 0, "fault not cleared by W1C"
            else:
                assert int(dut.fault.value) == fault_before
        assert await tb.fw.read(REG["FW_COUNT"]) == refusals
    tb.check()


@cocotb.test()
async def perf_counters_and_scrub(dut):
    """Counters count in CC off, stay zero in CC on (even enabled by firmware), count in
    devtools. During a scrub the host reads zero except CC_MODE (scrubbing = 1), the
    memory port back-pressures and its requests complete after the scrub; an FLR during
    a scrub restarts it; the scrub lasts depth cycles. Mode code 3 is ignored."""
    tb = CtrlTB(dut)
    await tb.power_on(Mode.OFF)
    for mode in MODES:
        await set_mode(tb, mode)
        await tb.fw.write(REG["PERF_CTRL"], 1)
        for _ in range(5):
            await tb.mem_access(Src.ENGINE, 1, 0)
        await tb.cycles(50)
        cyc, acc = await tb.fw.read(REG["PERF_CYCLES"]), await tb.fw.read(REG["PERF_ACCESSES"])
        if mode is Mode.ON:
            assert (cyc, acc) == (0, 0), f"CC on: counters {cyc}, {acc} not frozen at zero"
        else:
            assert cyc > 50 and acc == 5, f"{mode.name}: counters {cyc}, {acc}"
    await tb.host.write(REG["CC_MODE_SET"], 3)
    assert (await tb.fw.read(REG["CC_MODE"]) >> 2) & 3 == Mode.DEVTOOLS.value, "mode 3 accepted"
    assert await tb.fw.read(REG["CC_STATUS"]) == 2, "bad_mode not raised"
    await tb.fw.write(REG["SCRATCH0"], 0x77)
    # scrub timing and blocking
    await tb.flr(wait=False)
    start = tb.cycle
    v = await tb.host.read(REG["CC_MODE"])
    assert v >> 4 & 1, "CC_MODE.scrubbing not set during the scrub"
    assert await tb.host.read(REG["SCRATCH0"]) == 0
    tb.mem(Src.DMA, 3)
    await tb.cycles(20)
    assert tb.src.queue, "a memory request was taken during the scrub"
    await tb.flr(wait=False)                   # restart
    restart = tb.cycle
    await tb.wait_ready()
    took = tb.cycle - restart
    assert DEPTH <= took <= DEPTH + 4, f"scrub took {took} cycles for {DEPTH} words"
    await tb.mem_idle()
    assert tb.responses[-1][1]["data"] == 0
    tb.log.info("scrub of %d words: %d cycles (restart after %d)", DEPTH, took, restart - start)
    tb.check()
