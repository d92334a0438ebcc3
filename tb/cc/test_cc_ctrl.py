"""cocotb regression of ``cc_ctrl`` (hw/cc/ctrl.py). Every test runs under the per-cycle
scoreboard of :class:`tb.cc.env.CtrlTB` (RTL = golden model on every output, read
and response); directed tests add the properties the issue asks for, stated
independently of the model (a secret is unreadable, a refused access reads zero, …)."""
import itertools
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.cc import CCCtrl
from hw.cc.layout import Mode, Src
from hw.cc.regs import KEY_WORDS, SCRATCH_WORDS, SCRUB
from tb.common.scrub import Refusals, Scanner, bytes_secret

from .env import DEPTH, PROTECTED, REG, CtrlTB

SCRUB_CYCLES = CCCtrl(DEPTH, PROTECTED).scrub_cycles   # ready low after an FLR: the RTL's own

MODES = (Mode.OFF, Mode.ON, Mode.DEVTOOLS)
SKIP = ("host__", "fw__", "mem_req__")
ADDRS = sorted(REG.values()) + [0x1C, 0x3C, 0x60, 0xFC]     # mapped + a few unmapped
NAMES = {a: n for n, a in REG.items()}
# The decoupler policy written out by hand from the H100 source, per register, row and
# direction ("r": the host may read it, "w": write it), not read from hw/cc/regs.py ALLOW:
# CC off opens every register in the directions it has; CC on opens only the management
# window (mode, mode store, status, the decoupler's and firewall's logs); devtools adds the
# performance counters; while the scrub runs only CC_MODE (its `scrubbing` bit) is readable.
# Anything not listed (and every unmapped address) is refused.
WINDOW = {"CC_MODE": "r", "CC_MODE_SET": "w", "CC_STATUS": "rw", "DEC_COUNT": "r",
          "DEC_LOG": "r", "FW_COUNT": "r", "FW_LOG": "r"}
PERF = {"PERF_CTRL": "rw", "PERF_CYCLES": "r", "PERF_ACCESSES": "r"}
POLICY = {
    Mode.OFF: {**WINDOW, **PERF, **{f"KEY{k}": "w" for k in range(KEY_WORDS)},
               **{f"SCRATCH{k}": "rw" for k in range(SCRATCH_WORDS)}},
    Mode.ON: WINDOW,
    Mode.DEVTOOLS: {**WINDOW, **PERF},
    SCRUB: {"CC_MODE": "r"},
}


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
    DMA) are unreadable after the FLR into *to*: ``ready`` is low for exactly
    ``CCCtrl.scrub_cycles`` cycles after the FLR, no signal and no word of the memory
    holds a word of a secret (before the FLR, as a control, the same scan finds the key in
    the registers and the words in the memory), every memory word is zero, registers read
    zero. A mode write alone changes nothing until the FLR. The store survives FLRs and
    comes back from the EEPROM at power-on."""
    tb = CtrlTB(dut)
    refused = Refusals(tb.clk, dut.flr, dut.ready)
    await tb.power_on(Mode.OFF)
    scanner = Scanner(dut, skip=SKIP)
    await ReadOnly()
    scanner.baseline()
    await RisingEdge(tb.clk)
    for frm, to in itertools.product(MODES, MODES):
        await set_mode(tb, frm)
        secret = random.randbytes(32)
        words = [int.from_bytes(secret[4 * k:4 * k + 4], "little") for k in range(KEY_WORDS)]
        for k, w in enumerate(words):
            await tb.fw.write(REG[f"KEY{k}"], w)
        for k in range(SCRATCH_WORDS):
            await tb.fw.write(REG[f"SCRATCH{k}"], words[k])
        addrs = [0, PROTECTED - 1, PROTECTED % DEPTH, DEPTH - 1]
        blocks = {a: random.randbytes(16) for a in addrs}
        for a in addrs:
            await tb.mem_access(Src.DMA, a, 1, int.from_bytes(blocks[a], "little"))
        assert int(dut.key.value) == int.from_bytes(secret, "little"), "key state not written"
        secrets = [bytes_secret("key", "key state", secret)] + \
            [bytes_secret("memory", f"word {a}", b) for a, b in blocks.items()]
        await scanner.control(secrets, tb.clk, 1, {"key", "memory"})
        await RisingEdge(tb.clk)
        # a mode change without reset: only the store moves
        await tb.host.write(REG["CC_MODE_SET"], to.value)
        v = await tb.host.read(REG["CC_MODE"])
        assert (v & 3, (v >> 2) & 3) == (frm.value, to.value), f"{frm.name}->{to.name}: CC_MODE {v:#x}"
        assert int(dut.mode.value) == frm.value, "mode changed without a reset"
        await tb.flr()
        got = await refused.after_reset()
        assert got == SCRUB_CYCLES, f"{frm.name}->{to.name}: ready low for {got} cycles after " \
                                    f"the FLR, not CCCtrl.scrub_cycles = {SCRUB_CYCLES}"
        assert int(dut.mode.value) == to.value, f"{frm.name}->{to.name}: mode not applied"
        await ReadOnly()
        scan = scanner.assert_clean(secrets, f"{frm.name}->{to.name}: after the FLR")
        assert not scan.nonzero(("mem",)), f"{frm.name}->{to.name}: memory words not zero after the scrub"
        await RisingEdge(tb.clk)
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


def _write_value(name, mode):
    """What the policy test writes: a pattern, except where a write has a side effect the
    test does not want (the mode store keeps the active mode, the counters stay off)."""
    if name == "CC_MODE_SET":
        return mode.value
    return 0 if name and name.startswith(("PERF", "CC_STATUS")) else 0x5A5A5A5A


async def _probe(tb, mode, addr, write, in_scrub):
    """One host access to *addr*; returns (reached, read value). Reached = the decoupler did
    not count it in DEC_COUNT (read by the firmware port, after the scrub for *in_scrub*)."""
    name = NAMES.get(addr)
    if in_scrub:
        await tb.flr(wait=False)        # the scrub runs for DEPTH cycles: one access in it
    else:
        before = await tb.fw.read(REG["DEC_COUNT"])
    if write:
        await tb.host.write(addr, _write_value(name, mode))
        value = None
    else:
        value = await tb.host.read(addr)
    if in_scrub:
        assert not int(tb.dut.ready.value), "the scrub ended before the probe was done"
        await tb.wait_ready()
        before = 0                      # the FLR zeroed DEC_COUNT
    count = await tb.fw.read(REG["DEC_COUNT"])
    assert count - before in (0, 1), f"DEC_COUNT moved by {count - before} for one access"
    if count != before:
        log = await tb.fw.read(REG["DEC_LOG"])
        assert log == addr | (0x100 if write else 0), \
            f"DEC_LOG {log:#x} after the refused {'write' if write else 'read'} of {addr:#x}"
    return count == before, value


@cocotb.test()
async def decoupler(dut):
    """The BAR0 allow-list, per direction, for every register (and unmapped addresses) in
    every row: CC off, CC on, devtools and the scrub. Which accesses reach a register is
    observed (DEC_COUNT does not step) and must equal :data:`POLICY`, written by hand
    above, so an edit of hw/cc/regs.py ALLOW that opens one direction of one register in
    one row fails here. A refused read returns zero where the register holds a value, a
    refused write changes nothing; each is counted and its address latched."""
    tb = CtrlTB(dut)
    await tb.power_on(Mode.OFF)
    for row in MODES + (SCRUB,):
        mode = Mode.OFF if row == SCRUB else row      # the scrub row, entered from CC off
        await set_mode(tb, mode)
        reached = {}
        for addr in ADDRS:
            name = NAMES.get(addr)
            for write in (False, True):
                if name and name.startswith("SCRATCH"):
                    await tb.fw.write(addr, 0xA5A50000 | addr)
                ok, value = await _probe(tb, mode, addr, write, row == SCRUB)
                if ok:
                    reached[name or hex(addr)] = reached.get(name or hex(addr), "") + "wr"[not write]
                elif not write:
                    assert value == 0, f"{row}: refused read of {name or hex(addr)} returned {value:#x}"
                if not ok and write and name and name.startswith("SCRATCH") and row != SCRUB:
                    assert await tb.fw.read(addr) == 0xA5A50000 | addr, f"{row}: a refused write changed {name}"
                if ok and not write and name and name.startswith("SCRATCH"):
                    assert value == 0xA5A50000 | addr, f"{row}: {name} reads {value:#x}"
        want = {n: "".join(sorted(p, reverse=True)) for n, p in POLICY[row].items()}
        got = {n: "".join(sorted(p, reverse=True)) for n, p in reached.items()}
        wrong = {n: (got.get(n, "-"), want.get(n, "-")) for n in set(got) | set(want)
                 if got.get(n) != want.get(n)}
        assert not wrong, f"{getattr(row, 'name', row)}: host access differs from the policy " \
            f"(register: (reached, policy)) {dict(sorted(wrong.items()))}"
        if mode is not Mode.OFF or row == SCRUB:
            assert int(dut.key.value) == 0, f"{getattr(row, 'name', row)}: a host key write got through"
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
async def firewall_at_power_on(dut):
    """The mode loaded from the mode store at power-on governs the firewall at once, before
    any FLR: in CC on and devtools a host read of protected memory is refused and reads
    zero while the DMA reads it; in CC off both read it. (The functional bins
    cc_access.mode_x_flr "<mode> × before_flr".)"""
    tb = CtrlTB(dut)
    for mode in MODES:
        await tb.power_on(mode)
        assert int(dut.mode.value) == mode.value, f"mode {int(dut.mode.value)} after power-on with {mode.name}"
        addr = random.randrange(PROTECTED)
        secret = 0x5EC << 64 | addr
        await tb.mem_access(Src.DMA, addr, 1, secret)
        host = await tb.mem_access(Src.HOST, addr)
        allowed = mode is Mode.OFF
        assert (host["ok"], host["data"]) == (int(allowed), secret if allowed else 0), \
            f"{mode.name} at power-on: host read of protected {addr:#x} gave {host}"
        dma = await tb.mem_access(Src.DMA, addr)
        assert (dma["ok"], dma["data"]) == (1, secret), f"{mode.name} at power-on: DMA read gave {dma}"
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


def test_cc_ctrl():
    """pytest entry: this module's cocotb tests on ``cc_ctrl``."""
    from tb.common.sim import run

    run("cc_ctrl", "tb.cc.test_cc_ctrl")
