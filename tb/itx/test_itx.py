"""``itx_device`` on the RTL, driven by the CCU firmware model (sw/ccu) through its ports
(``ccu``: the SXP's registers; ``icu``: the ICU's), with the tile models of tb/system.

- ``itx_lifecycle``: the ITX lifecycle end to end — attest, keys, secure boot, the
  bootloader's measurement checked by the CCU, a data step after the key change, a
  checkpoint under the key the CCU derived, terminate; tile memory holds exactly the
  completion beats the tiles received; then a chip reset: the host link stays down for
  exactly ``scrub_cycles`` cycles (host reads return zero, no PCIe traffic, the tiles'
  port closed), after which every tile-memory word is zero and no key of the job is in any
  register or memory; the next tenant boots on it.
- ``itx_attack_reaches_ccu``: a flipped ciphertext bit → the SXP's exception on ``exc`` →
  the CCU reads AUTH, holds the tiles (``hold``, ``xb_i`` closed), zeroes its keys.
- ``itx_bad_completion_reaches_ccu``: a hostile host's completion with a tag no read holds
  → the read table drops it → ``exc`` → the CCU reads BAD_COMPLETION (UNKNOWN_TAG, the tag).
- ``itx_lost_completion_reaches_ccu``: the host never answers one read → it times out →
  ``exc`` → the CCU reads COMPLETION_TIMEOUT with that read's tag.
"""
import random

import cocotb
import pytest
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from hw.itx import ItxDevice, icu_register_map
from hw.pcie.layout import Cause as RdCause
from hw.sxp.packet import BEAT_BYTES, Kind
from hw.sxp.regs import Cause as SxpCause
from sw.ccu.cce import TeeState
from sw.ccu.sxp_port import ExceptionSource
from sw.itx.host import HostMemory
from sw.itx.testing import CcuJob, Scenario
from sw.itx.tile import Cause, SecurityException
from sw.pcie.beats import Beat, encode, header
from tb.common.sim import params
from tb.itx.env import ItxCcuPort
from tb.system.env import SystemTB, lanes_of, run_ccu
from tb.system.test_system import assert_no_key_left, boot, ccu_launched, start_main

PARAMS = params()
CONTEXTS = PARAMS.get("contexts", 16)
TILES = (0, 1, 2, 3)                 # the device's tile memory serves tiles 0..3
VICTIM, FRAME = 2, 1
ICU = icu_register_map()


def _rtl_figures():
    """(words, scrub_cycles): the RTL's own figures at the parameters under test."""
    from formal import discard
    dev = ItxDevice(**PARAMS)
    discard(dev)                     # built for its constants only
    return dev.words, dev.scrub_cycles


WORDS, SCRUB_CYCLES = _rtl_figures()


def scenario(dut, seed, **kw):
    lanes = lanes_of(dut)
    host = HostMemory(rng=random.Random(seed + 1000), latency=(1, 40), lanes=lanes)
    return Scenario(seed=seed, tiles=TILES, contexts=CONTEXTS, host=host, lanes=lanes, **kw)


class ItxTB(SystemTB):
    """SystemTB on itx_device: the tiles halt on ``exc``; the start waits for the link."""

    def __init__(self, dut, tiles, host, idle=0.0, stall=0.0):
        super().__init__(dut, tiles, host, CONTEXTS, idle=idle, stall=stall, pin="exc",
                         pin_cause=Cause.PIN)
        dut.tile_rd_addr.value = 0
        for s in ("addr", "w_stb", "w_data", "r_stb"):
            getattr(dut, f"icu__{s}").value = 0

    async def link_down_cycles(self, timeout=100_000):
        """Cycles with ``link_ready`` low from the first cycle with the reset low (called
        right after :meth:`reset`, which returns one clock edge after releasing it: that
        cycle counts), sampling the host side meanwhile: every cycle pcie_i.ready,
        pcie_o.valid and xb_i.ready must be low. Returns the count."""
        dut = self.dut
        for n in range(1, timeout):
            await ReadOnly()
            if int(dut.link_ready.value):
                return n
            for port in ("pcie_i__ready", "pcie_o__valid", "xb_i__ready"):
                assert not int(getattr(dut, port).value), f"{port} high during the ICU scrub"
            await RisingEdge(self.clk)
        raise AssertionError(f"link_ready not up within {timeout} cycles")

    async def tile_word(self, addr):
        await FallingEdge(self.clk)
        self.dut.tile_rd_addr.value = addr
        await RisingEdge(self.clk)
        await ReadOnly()
        value = int(self.dut.tile_rd_data.value)
        await FallingEdge(self.clk)
        return value

    async def tile_memory(self):
        return [[await self.tile_word(t * WORDS + w) for w in range(WORDS)] for t in TILES]


async def itx_setup(dut, sc, idle=0.1, stall=0.1):
    tb = ItxTB(dut, sc.tiles, sc.rt.host, idle, stall)
    sc.prepare(tb.tiles)
    await tb.start()
    down = await tb.link_down_cycles()
    tb.log.info("link up %d cycles after the power-on reset", down)
    return tb


async def launched(dut, sc, idle=0.1, stall=0.1):
    return await ccu_launched(dut, sc, idle, stall, make_tb=itx_setup,
                              make_port=lambda tb: ItxCcuPort(tb, ICU),
                              skip=("icu__", "tile_rd_addr"))


def expected_ring(tb, t, words):
    """Tile *t*'s receive ring as the completion beats it got on xb_o say it must be."""
    ring = [0] * words
    for k, data in enumerate(tb.xb_log.get(t, [])):
        ring[k % words] = data
    return ring


@cocotb.test()
async def itx_lifecycle(dut):
    sc = scenario(dut, 41)
    tb, ccu, port, scanner = await launched(dut, sc)
    await boot(tb, sc)
    await start_main(tb, ccu)
    await run_ccu(ccu.cce.next_key_set)
    await tb.run(sc.rt.step(sc.data))
    await tb.run(sc.rt.checkpoint(sc.plan))
    assert not tb.irq_seen and ccu.cce.exception_log == ()
    # tile memory: exactly the completion beats each tile received (the last WORDS of them)
    memory = await tb.tile_memory()
    for t, ring in zip(TILES, memory):
        assert tb.xb_log.get(t), f"tile {t} received nothing"
        assert ring == expected_ring(tb, t, WORDS), f"tile {t}: tile memory differs from xb_o"
    await run_ccu(ccu.cce.terminate)
    assert ccu.cce.state is TeeState.TERMINATED

    # chip reset: the ICU scrubs tile memory before the host link comes back
    new = scenario(dut, 42)
    await tb.restart(new.rt.host, TILES)
    down = await tb.link_down_cycles()
    assert down == SCRUB_CYCLES, f"link down {down} cycles after the reset, not " \
                                 f"ItxDevice.scrub_cycles = {SCRUB_CYCLES}"
    memory = await tb.tile_memory()
    dirty = [(t, w) for t, ring in zip(TILES, memory) for w, v in enumerate(ring) if v]
    assert not dirty, f"tile memory not scrubbed: {len(dirty)} words, first {dirty[:4]}"
    await assert_no_key_left(tb, port, scanner, "after the chip reset")

    # the next tenant: a new job boots on the scrubbed device
    new.prepare(tb.tiles)
    job = CcuJob(new, ItxCcuPort(tb, ICU))
    new.rt.configure(tb.config_writer())
    await tb.host_csr.flush()
    await run_ccu(job.launch)
    await boot(tb, new)


@cocotb.test()
async def itx_host_locked_out_during_scrub(dut):
    """During the ICU scrub a host read returns zero and a host write changes nothing."""
    sc = scenario(dut, 43)
    tb = ItxTB(dut, sc.tiles, sc.rt.host)
    await tb.reset()
    status = tb.regmap["STATUS"].addr
    got = await tb.host_csr.read(status)
    assert not int(dut.link_ready.value), "the scrub was over before the host read"
    assert got == 0, f"host read {got:#x} during the scrub"
    await tb.host_csr.write_now(tb.regmap["KSEL_BASE0"].addr, 0x1234_0000)
    await tb.link_down_cycles()
    assert await tb.ccu_csr.read(tb.regmap["KSEL_BASE0"].addr) == 0, \
        "a host write during the scrub reached the SXP"
    await tb.host_csr.write_now(tb.regmap["KSEL_BASE0"].addr, 0x1234_0000)
    assert await tb.ccu_csr.read(tb.regmap["KSEL_BASE0"].addr) == 0x1234_0000, \
        "control: a host write after the scrub does reach the SXP"


async def expect_pin(tb, job, also=()):
    """*job* ends halted by the exception pin (or by a cause in *also*: a tile sees the
    SXP's zeroed tag slot a cycle before the pin rises)."""
    try:
        await tb.run(job)
    except SecurityException as e:
        assert e.cause in (Cause.PIN, *also), f"halted by {e.cause}, not the exception pin"
    else:
        raise AssertionError("the attack went undetected")


async def handled(tb, ccu, source, code=None, tag=None):
    """The CCU's handler on the pin: the cause it read, the job stopped, the tiles held."""
    await tb.until_high(tb.dut.exc, timeout=64)
    event = await run_ccu(lambda: ccu.cce.on_exception(time=tb.now))
    assert event is not None and event.stopped, f"the CCU did not stop the job: {event}"
    c = event.cause
    assert c.source is source, f"cause {c}, expected {source}"
    if code is not None:
        assert c.code == code, f"cause code {c.code}, expected {code}"
    if tag is not None:
        assert c.tag == tag, f"cause tag {c.tag}, expected {tag}"
    await tb.cycles(2)
    assert int(tb.dut.hold.value) and not int(tb.dut.xb_i__ready.value), "tiles not held"
    assert ccu.cce.state is TeeState.STOPPED
    return event


@cocotb.test()
async def itx_attack_reaches_ccu(dut):
    sc = scenario(dut, 44)
    sc.flip(sc.frame_addr(VICTIM, FRAME), 16 + random.randrange(400), random.randrange(8))
    tb, ccu, port, scanner = await launched(dut, sc)
    await expect_pin(tb, sc.rt.boot(), also=(Cause.SXP_AUTH,))
    await handled(tb, ccu, ExceptionSource.SXP, code=SxpCause.AUTH.value)
    await assert_no_key_left(tb, port, scanner, "after the CCU's exception handler")


@cocotb.test()
async def itx_bad_completion_reaches_ccu(dut):
    sc = scenario(dut, 45)
    tb, ccu, port, scanner = await launched(dut, sc)
    entries = PARAMS.get("entries", 32)
    bogus = entries + 3                                      # no read ever holds this tag
    beat_bytes = BEAT_BYTES * tb.lanes
    hdr = header(kind=Kind.READ_CPL, tag=bogus, addr=sc.frame_addr(VICTIM, FRAME),
                 length=beat_bytes)
    for t in tb.tiles.values():                              # start the boot, then strike
        t.run(sc.rt.boot()[t.id](t))
    await tb.cycles(200)
    tb.cpl_src.send(encode(Beat(0x5A5A, hdr, 1, 1), tb.lanes))
    await expect_pin(tb, {})
    await handled(tb, ccu, ExceptionSource.BAD_COMPLETION, code=RdCause.UNKNOWN_TAG.value,
                  tag=bogus)


@cocotb.test()
async def itx_lost_completion_reaches_ccu(dut):
    sc = scenario(dut, 46)
    lost = sc.frame_addr(VICTIM, FRAME)
    host = sc.rt.host
    tags = {}
    answer = host.request

    def request(packet, now=0):                    # the host swallows the victim's read
        h = packet[0].hdr
        if h["kind"] == Kind.READ_REQ.value and h["addr"] == lost:
            tags["lost"] = h["tag"]
            host.reads.append((h["addr"], h["length"], h["tag"]))
            return
        answer(packet, now)
    host.request = request
    tb, ccu, port, scanner = await launched(dut, sc)
    dut.rd_timeout.value = 400
    await expect_pin(tb, sc.rt.boot())
    assert "lost" in tags, "the victim's read never left"
    await handled(tb, ccu, ExceptionSource.COMPLETION_TIMEOUT, tag=tags["lost"])


# ---- pytest entry ---------------------------------------------------------------------------
def test_itx_device():
    """Every test above on one build: 4 contexts, 16 read-table entries, 4 tiles × 64 words."""
    from tb.common.sim import run

    run("itx_device", "tb.itx.test_itx", params={"contexts": 4, "entries": 16})


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_parameters_rejected():
    """Bad parameters of ItxDevice: ValueError, TypeError for a non-int. The half-built
    devices are reference cycles, never elaborated: collected here, their UnusedElaboratable
    warnings fall inside the filter instead of at interpreter exit."""
    import gc

    from hw.itx import ItxDevice
    for bad, exc in (({"tiles": 0}, ValueError), ({"tiles": 17}, ValueError),
                     ({"words": 48}, ValueError), ({"words": 8}, ValueError),
                     ({"tiles": "4"}, TypeError), ({"lanes": 3}, ValueError)):
        with pytest.raises(exc):
            ItxDevice(**bad)
    gc.collect()


def test_icu_registers_documented():
    """docs/itx.md carries the ICU register table generated from hw/itx/regs.py."""
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "itx.md").read_text()
    assert ICU.markdown(heading="####") in doc, "docs/itx.md: regenerate the ICU register table"
