"""Directed register sweep of ``gpu_cc`` (hw/cc/gpu.py): ``cc_ctrl``'s register map, the
BAR0 decoupler and the firewall counters through ``gpu_cc``'s own ports, and the
``cc_dma`` refusals that only a descriptor in CC on reaches.

Every cycle :class:`RegScoreboard` feeds :class:`sw.cc.model.CCCtrlModel` what ``gpu_cc``'s
``host``, ``fw`` and external ``mem_req`` ports carry and compares ``mode``,
``mode_store``, ``ready``, ``fault``, every read's data and every external memory
response with it (the model is built from :mod:`hw.cc.regs`, never from the RTL). On top
of it each sweep tallies the host accesses :func:`hw.cc.regs.allowed` refuses and checks
``DEC_COUNT``/``DEC_LOG`` against that tally.

- ``register_sweep``: power-on with ``mode_nv`` 0..3 (3 acts as ON), then CC off, on and
  devtools (the in-band way: ``CC_MODE_SET``, FLR): in each, every register (and a few
  unmapped addresses) read, written and read back from the host port and from the
  firmware port; a ``CC_MODE_SET`` of 3 (``bad_mode``), an engine fault and firewall
  refusals on the external port before the sweep so that ``CC_STATUS``, ``FW_COUNT`` and
  ``FW_LOG`` hold something; ``PERF_CTRL`` enabled for a while in every mode.
- ``sweep_during_scrub``: the same sweep from both ports while the reset scrub runs after
  an FLR (only ``CC_MODE`` is readable from the host; the firmware port is closed).
- ``counters_saturate``: ``DEC_COUNT`` and ``FW_COUNT`` preloaded (simulator backdoor,
  model preloaded alike) to 2^32 - 2, then three refusals each: they stop at 2^32 - 1.
- ``dma_refusals_in_cc_on``: descriptors ``gpu_cc``'s other tests send only in CC off (the
  plain engine): a channel out of range, a bad region behind a frame in flight (the
  drain waits), inbound NO_KEY / BAD_IV / REPLAY, and IV exhaustion — statuses and memory
  against :class:`sw.cc.model.CCDmaModel`.
"""
import random

import cocotb
from cocotb.triggers import RisingEdge

from hw.cc.layout import CTR_LIMIT, Dir, Mode, Src, Status
from hw.cc.regs import (
    GPU_READY,
    SCRUB,
    allowed,
    gpu_register_map,
    register_map,
)
from sw.cc.host import HostChannel
from sw.cc.model import Desc

from .env import (
    CHANNELS,
    DEPTH,
    FRAME_BLOCKS,
    PROTECTED,
    REG,
    Alloc,
    CtrlChecks,
    GpuTB,
    inbound,
    outbound,
)

SAT = (1 << 32) - 1
UNMAPPED = (0x1C, 0x2C, 0x3C, 0x60, 0x90, 0xFC)          # no register: refused everywhere
ADDRS = [r.addr for r in register_map()] + list(UNMAPPED)


# ================================================================== scoreboard
class RegScoreboard(CtrlChecks):
    """:class:`tb.cc.env.CtrlChecks` on ``gpu_cc``'s ``cc_ctrl`` side: ``gpu_cc`` has no
    ``key`` port, answers the DMA key block and the RTS window of the firmware port and
    ``GPU_READY`` of the host port itself (fed to the model as idle cycles, not checked)
    and turns the DMA's initiator code into 3. Valid while no
    DMA traffic shares the memory."""

    KEY_OUTPUT = False
    FW_OWN = tuple(r.addr for r in gpu_register_map())
    HOST_OWN = (GPU_READY,)

    def __init__(self, tb):
        self.tb, self.dut, self.clk, self.host, self.fw = tb, tb.dut, tb.clk, tb.host, tb.fw
        self._start_ctrl_checks()

    def _src_code(self, src):
        return 3 if src == Src.DMA.value else src

    def check(self):
        assert not self.errors, f"{len(self.errors)} mismatches with CCCtrlModel, first: " + \
            "; ".join(self.errors[:3])
        assert self.reads_checked, "the scoreboard checked no read"


# ================================================================== stimulus
class Tally:
    """Host accesses the allow-list refuses, counted from :func:`hw.cc.regs.allowed`."""

    def __init__(self):
        self.count, self.last = 0, None

    def host(self, row, addr, write):
        if not allowed(row, addr, write):
            self.count += 1
            self.last = (addr, int(write))


def pattern(addr, port):
    """A write value that names its register and port (bit 0 set: PERF_CTRL.en)."""
    return (0xA5 if port == "host" else 0x5A) << 24 | random.getrandbits(16) << 8 | addr | 1


async def sweep(tb, row, tally):
    """Every address read, written and read back, from the host port then the firmware
    port (in *row* of the allow-list; the host's refusals tallied). Reads check against
    the model (:class:`RegScoreboard`); returns nothing."""
    for addr in ADDRS:
        if addr == REG["CC_MODE_SET"]:
            continue                        # written on purpose by the callers
        for port in ("host", "fw"):
            bus = getattr(tb, port)
            for a, write in ((addr, False), (addr, True), (addr, False)):
                if port == "host":
                    tally.host(row, a, write)
                if write:
                    await bus.write(a, pattern(a, port))
                else:
                    await bus.read(a)


async def power_on(tb, nv):
    """``rst`` with ``mode_nv`` = *nv* (0..3), then the power-on scrub."""
    tb.dut.mode_nv.value = nv
    tb._forget()
    await tb.reset()
    await tb.wait_ready()
    await tb.settle_mode()


async def into(tb, mode, tally):
    """CC_MODE_SET from the firmware port (no refusal to tally), FLR: *mode* active."""
    await tb.fw.write(REG["CC_MODE_SET"], mode.value)
    await tb.flr()
    tally.count, tally.last = 0, None     # the FLR clears DEC_COUNT / DEC_LOG


async def fill_status_and_logs(tb, sb, row):
    """Before a sweep: a CC_MODE_SET of 3 (bad_mode), an engine write outside the
    protected region (fault in CC on / devtools), host-like reads of protected memory
    (firewall refusals outside CC off): CC_STATUS, FW_COUNT and FW_LOG hold something."""
    await tb.fw.write(REG["CC_MODE_SET"], 3)
    assert sb.model.bad_mode, "model: CC_MODE_SET of 3 did not set bad_mode"
    word = random.randrange(PROTECTED, DEPTH)
    await tb.ext_access(Src.ENGINE, word, write=1, data=random.getrandbits(128))
    for src in (Src.HOST, Src.DMA):
        await tb.ext_access(src, random.randrange(PROTECTED))
    await tb.ext_access(Src.HOST, word)                       # allowed everywhere
    refused = 0 if row is Mode.OFF else 3
    assert sb.model.fw_count == refused, f"{row}: model FW_COUNT {sb.model.fw_count}, not {refused}"


async def check_dec(tb, tally, what):
    """DEC_COUNT / DEC_LOG (read from the firmware port) against the tally."""
    count = await tb.fw.read(REG["DEC_COUNT"])
    assert count == tally.count, f"{what}: DEC_COUNT {count}, allow-list tally {tally.count}"
    if tally.last is not None:
        log = await tb.fw.read(REG["DEC_LOG"])
        want = tally.last[0] | tally.last[1] << 8
        assert log == want, f"{what}: DEC_LOG {log:#x}, last refusal {want:#x}"


async def sweep_mode(tb, sb, mode, tally, what):
    """One mode's sweep: status and logs filled, PERF_CTRL on for a while, every register
    from both ports, the counters checked, a host CC_MODE_SET refused or taken."""
    await fill_status_and_logs(tb, sb, mode)
    await tb.fw.write(REG["PERF_CTRL"], 1)
    await tb.cycles(random.randint(5, 40))
    await sweep(tb, mode, tally)
    for value in (3, mode.value):          # bad_mode again, then the mode store kept
        tally.host(mode, REG["CC_MODE_SET"], True)
        await tb.host.write(REG["CC_MODE_SET"], value)
    await check_dec(tb, tally, what)
    cycles = await tb.fw.read(REG["PERF_CYCLES"])
    assert (cycles == 0) == (mode is Mode.ON), f"{what}: PERF_CYCLES {cycles} (held at 0 only in CC on)"
    sb.check()


# ================================================================== tests
@cocotb.test()
async def register_sweep(dut):
    """mode_nv 0..3 at power-on, then CC off, on, devtools: every register from both ports."""
    tb = GpuTB(dut)
    sb = RegScoreboard(tb)
    tally = Tally()
    for nv in range(4):
        await power_on(tb, nv)
        want = Mode.ON if nv == 3 else Mode(nv)
        assert int(dut.mode.value) == want.value and int(dut.mode_store.value) == want.value, \
            f"mode_nv {nv}: mode {int(dut.mode.value)}, store {int(dut.mode_store.value)}, not {want}"
        tally.count, tally.last = 0, None
        cc_mode = await tb.host.read(REG["CC_MODE"])
        assert cc_mode == want.value | want.value << 2, f"mode_nv {nv}: CC_MODE {cc_mode:#x}"
        await sweep_mode(tb, sb, want, tally, f"power-on mode_nv {nv}")
    for mode in (Mode.OFF, Mode.ON, Mode.DEVTOOLS, Mode.OFF):
        await into(tb, mode, tally)
        assert int(dut.mode.value) == mode.value, f"FLR into {mode}: mode {int(dut.mode.value)}"
        await sweep_mode(tb, sb, mode, tally, f"after an FLR into {mode.name}")


@cocotb.test()
async def sweep_during_scrub(dut):
    """The sweep from both ports while the reset scrub runs (in each mode's FLR)."""
    tb = GpuTB(dut)
    sb = RegScoreboard(tb)
    await power_on(tb, 0)
    tally = Tally()
    for mode in (Mode.OFF, Mode.ON, Mode.DEVTOOLS):
        await tb.fw.write(REG["SCRATCH0"], 0x1234_5678)
        await tb.fw.write(REG["CC_MODE_SET"], mode.value)
        await tb.flr(wait=False)
        tally.count, tally.last = 0, None
        ops = [(port, a, w) for a in ADDRS for port in ("host", "fw") for w in (False, True)]
        for port, a, w in ops:
            if port == "host":
                tally.host(SCRUB, a, w)
            getattr(tb, port).submit(w, a, pattern(a, port))
        last = [getattr(tb, p).submit(False, REG["CC_MODE"]) for p in ("host", "fw")]
        host_mode = await tb.host.wait(last[0])
        fw_mode = await tb.fw.wait(last[1])
        assert host_mode >> 4 & 1, f"{mode.name}: the sweep outlasted the scrub (CC_MODE {host_mode:#x})"
        assert fw_mode == 0, f"{mode.name}: the firmware port read {fw_mode:#x} during the scrub"
        tally.host(SCRUB, REG["CC_MODE"], False)
        await tb.wait_ready()
        await tb.settle_mode()
        assert await tb.fw.read(REG["SCRATCH0"]) == 0, "a write during the scrub landed"
        await check_dec(tb, tally, f"scrub into {mode.name}")
        sb.check()


async def preload(tb, sb, name, value):
    """Backdoor: *name* (``dec_count`` / ``fw_count``) of cc_ctrl and the model set to *value*."""
    await RisingEdge(tb.clk)
    getattr(tb.dut.ctrl, name).value = value
    setattr(sb.model, name, value)


@cocotb.test()
async def counters_saturate(dut):
    """DEC_COUNT and FW_COUNT stop at 2^32 - 1 (preloaded near it: 2^32 refusals would
    take too long)."""
    tb = GpuTB(dut)
    sb = RegScoreboard(tb)
    await power_on(tb, Mode.ON.value)
    await preload(tb, sb, "dec_count", SAT - 1)
    for _ in range(3):
        await tb.host.read(REG["SCRATCH1"])         # refused in CC on
    assert await tb.fw.read(REG["DEC_COUNT"]) == SAT, "DEC_COUNT did not saturate"
    await preload(tb, sb, "fw_count", SAT - 1)
    for _ in range(3):
        await tb.ext_access(Src.HOST, 0)            # protected: refused in CC on
    assert await tb.fw.read(REG["FW_COUNT"]) == SAT, "FW_COUNT did not saturate"
    sb.check()


@cocotb.test()
async def dma_refusals_in_cc_on(dut):
    """CC on: CHANNEL, REGION behind a frame in flight, IN NO_KEY / BAD_IV / REPLAY and
    IV_EXHAUSTED, against CCDmaModel."""
    tb = GpuTB(dut)
    await tb.power_on(Mode.ON)
    prot, bounce = Alloc(tb.PROT), Alloc(tb.BOUNCE)
    keyless = CHANNELS - 1
    chans = {}
    for ch in range(keyless):
        key, iv = random.randbytes(32), 10 + ch
        await tb.install(ch, key, iv)
        chans[ch] = HostChannel(key, ch, iv)
    chans[keyless] = HostChannel(random.randbytes(32), keyless, 0)
    want = []
    # a channel out of range; a bad region queued behind an OUT frame still in flight
    bad_ch = random.randrange(CHANNELS, 16)
    want.append(tb.submit(Desc(Dir.OUT, bad_ch, 2, prot.take(2), bounce.take(4), 1)))
    d, _ = outbound(tb, prot, bounce, 0, FRAME_BLOCKS, 2)
    want.append(tb.submit(d))
    want.append(tb.submit(Desc(Dir.OUT, 0, 4, tb.BOUNCE[0], tb.BOUNCE[0] + 64, 3)))
    want.append(tb.submit(Desc(Dir.IN, 0, 0, tb.BOUNCE[0], 0, 4)))
    await tb.drain()
    # inbound refusals at the IV block
    d, _ = inbound(tb, chans, prot, bounce, keyless, 3, 5)
    want.append(tb.submit(d))
    d, _ = inbound(tb, chans, prot, bounce, 1, 3, 6, how="badiv")
    want.append(tb.submit(d))
    chans[1].tx = 4                                   # seal below the receive counter
    d, _ = inbound(tb, chans, prot, bounce, 1, 3, 7, how="replay")
    want.append(tb.submit(d))
    await tb.drain()
    # the last counter value: one frame, then IV_EXHAUSTED
    await tb.install(0, random.randbytes(32), CTR_LIMIT - 1)
    for tag in (8, 9):
        d, _ = outbound(tb, prot, bounce, 0, 2, tag)
        want.append(tb.submit(d))
    await tb.drain()
    expect = [Status.CHANNEL, Status.OK, Status.REGION, Status.LENGTH, Status.NO_KEY,
              Status.BAD_IV, Status.REPLAY, Status.OK, Status.IV_EXHAUSTED]
    assert want == expect, f"model verdicts {[s.name for s in want]}, not {[s.name for s in expect]}"
    got = [s["code"] for _, s in tb.statuses]
    assert got == expect, f"statuses {[getattr(s, 'name', s) for s in got]}"
    assert tb.statuses[-1][1]["ctr"] == CTR_LIMIT, f"IV_EXHAUSTED ctr {tb.statuses[-1][1]['ctr']:#x}"
    tb.check()


def test_gpu_cc_regs():
    """pytest entry: this module's cocotb tests on ``gpu_cc``."""
    from tb.common.sim import run

    run("gpu_cc", "tb.cc.test_gpu_cc_regs")
