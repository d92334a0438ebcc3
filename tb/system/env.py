"""cocotb environment of ``sxp_system``: the tile model, host memory and the shim around
the RTL, packet by packet.

- :class:`SxpCsrBus` is a ``host``/``ccu`` port (:class:`tb.common.csr.CsrBus`) that also
  keeps the CSR operations made by synchronous code (the shim's ``configure(write)``,
  :class:`sw.itx.csr.CsrKeyPort` for the CCU) until :meth:`SxpCsrBus.flush` plays them (one
  write per cycle; key commits wait for STATUS.key_busy = 0).
- :class:`SystemTB` is the device: tiles (:class:`sw.itx.tile.Tile`) send their request
  packets into ``xb_i`` (whole packets, round robin over tiles); beats leaving ``pcie_o`` are
  gathered into packets for :class:`sw.itx.host.HostMemory`, whose completions (random
  RCB splits, latency, interleaving) go into ``pcie_i``; completions leaving ``xb_o`` are
  routed by ``hdr.tile`` into the tiles' staging buffers. A frame whose tag slot arrives
  zero halts its tile at once (the tile model's rule: the SXP zeroes the tag slot of a
  frame it refused). Any other frame whose last completion has arrived is committed only
  after ``irq`` has stayed low for :data:`VERDICT_CYCLES` cycles after it (the SXP
  latches AUTH when the tag beat leaves the engine, about when the beat reaches ``xb_o``);
  ``irq`` high halts every tile (the CCU's reaction) and :meth:`run`
  raises the security exception.
Every stream port can be given idle cycles / back-pressure.

Lanes: :func:`lanes_of` reads the beat width off the DUT (``xb_i__payload`` is
``beat_layout(lanes)``), so one testbench serves ``sxp_system`` (16-byte beats) and
``sxp_system_x4`` (64-byte beats); the host memory and the tiles must be built at the same
lanes. The host side feeds ``pcie_i`` several completion packets ahead, so at one 64-byte
beat per cycle the host model never starves the RTL.
"""
from collections import deque

import cocotb
from cocotb.task import bridge, resume
from cocotb.triggers import ReadOnly, RisingEdge

from hw.sxp.packet import BEAT_BYTES, Kind, beat_layout
from sw.itx.csr import TRUST_POLLS, CsrConfigWriter, CsrKeyPort, status_fields
from sw.itx.tile import Cause, SecurityException, Tile
from sw.pcie.beats import decode, encode
from tb.common.csr import CsrBus
from tb.common.stream import StreamSink, StreamSource, random_pause
from tb.common.tb import TB

__all__ = ["SxpCsrBus", "SystemTB", "VERDICT_CYCLES", "lanes_of", "RtlCcuPort", "run_ccu"]

VERDICT_CYCLES = 2
CPL_AHEAD_BEATS = 8     # completion beats the host keeps queued ahead of pcie_i


def lanes_of(dut):
    """The lanes the DUT was built with, from the width of its ``xb_i`` payload."""
    width = len(dut.xb_i__payload)
    for lanes in (1, 2, 4):
        if beat_layout(lanes).size == width:
            return lanes
    raise ValueError(f"xb_i payload of {width} bits is no beat_layout(lanes)")


class SxpCsrBus(CsrBus):
    """A CSR port of the SXP's register map *regmap*. Synchronous code, which cannot await,
    defers writes (:meth:`defer`) and waits for STATUS.key_busy = 0 (:meth:`defer_key_idle`);
    :meth:`flush` plays them in order."""

    def __init__(self, dut, name, clk, regmap):
        super().__init__(dut, name, clk)
        self.regmap = regmap
        self.deferred = deque()         # (addr, data), or None: wait for key_busy = 0

    # synchronous side
    def defer(self, addr, data):
        self.deferred.append((addr, data))

    def defer_key_idle(self):
        self.deferred.append(None)

    # simulation side
    async def flush(self):
        """Play the deferred operations; returns once the last write took effect."""
        last = None
        while self.deferred:
            op = self.deferred.popleft()
            if op is None:
                await self._wait_key_idle()     # its reads queue behind the writes
            else:
                last = self.submit(True, *op)
        if last is not None:
            await self.wait(last)

    async def write_now(self, addr, data):
        """One write, played at once (deferred operations first)."""
        self.defer(addr, data)
        await self.flush()

    async def key_idle(self):
        """Wait until STATUS.key_busy = 0 (a key commit waits for it)."""
        self.defer_key_idle()
        await self.flush()

    async def _wait_key_idle(self):
        for _ in range(1000):
            if not (await self.status())["key_busy"]:
                return
        raise AssertionError("STATUS.key_busy stuck")

    async def status(self):
        return status_fields(self.regmap, await self.read(self.regmap["STATUS"].addr))

    async def wait_trusted(self):
        """STATUS once trusted mode has taken effect (it may lag the CTRL.trust write by
        a few cycles) or an exception is latched; AssertionError if neither comes."""
        for _ in range(TRUST_POLLS):
            st = await self.status()
            if st["trusted"] or st["exc"]:
                return st
        raise AssertionError(f"STATUS.trusted still 0 after {TRUST_POLLS} reads: {st}")


class SystemTB(TB):
    """*pin*: the output whose rise halts every tile (``irq`` of sxp_system; ``exc`` of
    itx_device), reported as *pin_cause*."""

    def __init__(self, dut, tiles, host, contexts, idle=0.0, stall=0.0, rng=None,
                 pin="irq", pin_cause=Cause.SXP_AUTH):
        super().__init__(dut)
        self.pin, self.pin_cause = getattr(dut, pin), pin_cause
        self.xb_log = {}             # tile -> data of every completion beat it got, in order
        from hw.sxp.regs import register_map
        self.regmap = register_map(contexts)
        self.contexts = contexts
        self.lanes = lanes_of(dut)
        self.beat_bytes = BEAT_BYTES * self.lanes
        if host.lanes != self.lanes:
            raise ValueError(f"host memory at lanes {host.lanes}, DUT at lanes {self.lanes}")
        self.xb_src = StreamSource(dut, "xb_i", self.clk)
        self.xb_sink = StreamSink(dut, "xb_o", self.clk)
        self.req_sink = StreamSink(dut, "pcie_o", self.clk)
        self.cpl_src = StreamSource(dut, "pcie_i", self.clk)
        if idle:
            self.xb_src.set_pause(random_pause(idle, rng) if rng else random_pause(idle))
            self.cpl_src.set_pause(random_pause(idle, rng) if rng else random_pause(idle))
        if stall:
            self.xb_sink.set_pause(random_pause(stall, rng) if rng else random_pause(stall))
            self.req_sink.set_pause(random_pause(stall, rng) if rng else random_pause(stall))
        self.host_csr = SxpCsrBus(dut, "host", self.clk, self.regmap)
        self.ccu_csr = SxpCsrBus(dut, "ccu", self.clk, self.regmap)
        dut.rd_timeout.value = 0
        self.host = host
        self.tiles = {t: Tile(t, lanes=self.lanes) for t in tiles}
        self.now = 0
        self.exception = None
        self.irq_seen = False
        self.held = False
        self._restarting = False     # a chip reset is under way: the pump moves nothing
        self._rr = deque(self.tiles)
        self._req_beats, self._cpl_beats = [], []
        self._verdicts = []          # (cycle, tile) frames waiting for the irq verdict
        self._cpl_queue = deque()    # host completion beats not yet in the source
        self.beats_to_tiles = 0
        self.frames = 0
        self.writes_sent = self.writes_stored = 0
        self._xb_lock = {}

    # ---- the shim's interfaces bound to the CSR ports --------------------------------------
    def config_writer(self):
        return CsrConfigWriter(self.host_csr.defer, self.contexts)

    def key_port(self):
        return CsrKeyPort(self.ccu_csr.defer, self.contexts, self.ccu_csr.defer_key_idle)

    async def start(self):
        await self.reset()
        # the sinks were ready during reset: forget what the DUT still held from a previous
        # test before the reset took effect
        self.xb_sink.clear()
        self.req_sink.clear()
        cocotb.start_soon(self._pump())

    async def restart(self, host, tiles):
        """A chip reset between two runs of a job (keys scrubbed, trusted mode left): new
        host memory and fresh tiles; nothing in flight survives. While the reset is under way
        the pump moves nothing: a read request the SXP still sends as the reset begins must
        not reach the host, whose answer would enter ``pcie_i`` after the reset and be cut
        off mid-packet by the clear below (the table would then read the next read's
        completion as the rest of that packet: ADDRESS, and a read that never ends)."""
        self._restarting = True
        self.xb_src.clear()
        self.cpl_src.clear()
        self.xb_sink.clear()
        self.req_sink.clear()
        await self.reset()
        for port in (self.xb_src, self.cpl_src, self.xb_sink, self.req_sink):
            port.clear()
        if host.lanes != self.lanes:
            raise ValueError(f"host memory at lanes {host.lanes}, DUT at lanes {self.lanes}")
        self.host, self.tiles = host, {t: Tile(t, lanes=self.lanes) for t in tiles}
        self.writes_sent = self.writes_stored = 0
        self._xb_lock = {}
        self._rr = deque(self.tiles)
        self._req_beats, self._cpl_beats, self._verdicts = [], [], []
        self.exception, self.irq_seen, self.held = None, False, False
        self.xb_log = {}
        self._restarting = False

    # ---- one cycle of the world around the RTL ----------------------------------------------
    async def _pump(self):
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.now += 1
            if self._restarting:
                continue
            irq = int(self.pin.value)
            if irq and not self.irq_seen:
                self.irq_seen = True
                self._halt_all(self.pin_cause, f"{self.pin._name} at cycle {self.now}")
            self._move()

    def hold(self):
        """The CCU holds the tiles (its exception handler): every tile halts, nothing more
        is issued until :meth:`restart`."""
        self.held = True
        self._halt_all(Cause.HELD, "held by the CCU")

    def _halt_all(self, cause, detail):
        for tile in self.tiles.values():
            if tile.exception is None and (tile.busy or tile.complete):
                tile.security_exception(cause, detail)
        if self.exception is None:
            self.exception = SecurityException(cause, None, detail)
        self._verdicts.clear()

    def _move(self):
        # tiles -> xb_i, whole packets, round robin over tiles. Like the exchange block, it
        # lets one tile at a time use an exchange-block context for writes: from the first
        # packet of a written frame to its cc packet no other tile's write on that xbctx
        # goes (ITX: "its physical key context is used by one tile at a time").
        if len(self.xb_src.queue) < 8 and not self.held:
            for _ in range(len(self._rr)):
                t = self._rr[0]
                self._rr.rotate(-1)
                box = self.tiles[t].outbox
                if not box:
                    continue
                h = box[0][0].hdr
                write = h["kind"] == Kind.WRITE_REQ.value
                if write and self._xb_lock.get(h["xbctx"], t) != t:
                    continue
                packet = box.popleft()
                for beat in packet:
                    self.xb_src.send(encode(beat, self.lanes))
                if write:
                    self.writes_sent += 1
                    if h["cc"]:
                        self._xb_lock.pop(h["xbctx"], None)
                    else:
                        self._xb_lock[h["xbctx"]] = t
                break
        # pcie_o -> host
        while self.req_sink.queue:
            beat = decode(self.req_sink.queue.popleft(), self.lanes)
            self._req_beats.append(beat)
            if beat.last:
                self._check_request(self._req_beats, self.beat_bytes)
                self.writes_stored += beat.hdr["kind"] == Kind.WRITE_REQ.value
                self.host.request(self._req_beats, self.now)
                self._req_beats = []
        # host -> pcie_i: a few beats ahead (never starving a port that takes a beat per
        # cycle, whatever the packet sizes), few enough that the host's interleaving
        # choices stay live
        while len(self.cpl_src.queue) < CPL_AHEAD_BEATS:
            packet = self.host.completion(self.now)
            if packet is None:
                break
            for beat in packet:
                self.cpl_src.send(encode(beat, self.lanes))
        # xb_o -> tiles (staging)
        while self.xb_sink.queue:
            beat = decode(self.xb_sink.queue.popleft(), self.lanes)
            self.beats_to_tiles += 1
            self.xb_log.setdefault(beat.hdr["tile"], []).append(beat.data)
            self._cpl_beats.append(beat)
            if beat.last:
                packet, self._cpl_beats = self._cpl_beats, []
                h = packet[0].hdr
                if h["kind"] != Kind.READ_CPL.value or h["tile"] not in self.tiles:
                    raise AssertionError(f"xb_o sent {packet[0]!r} to no tile of this test")
                tile = self.tiles[h["tile"]]
                if tile.deliver(packet):
                    self._verdicts.append((self.now, tile))
        # verdicts: irq low for VERDICT_CYCLES after the frame's last beat -> commit
        while self._verdicts and self._verdicts[0][0] + VERDICT_CYCLES <= self.now:
            _, tile = self._verdicts.pop(0)
            if self.exception is None:
                tile.commit()
                self.frames += 1

    @staticmethod
    def _check_request(packet, beat_bytes):
        """A packet on pcie_o is whole and on beats: address and length multiples of the
        beat, one header on every beat, ``first`` on the first beat only, as many beats as
        its length says (one for a read request) — so the merge of read requests and write
        packets never cut a packet."""
        h = packet[0].hdr
        assert h["addr"] % beat_bytes == 0 and h["length"] % beat_bytes == 0, \
            f"pcie_o packet off the {beat_bytes}-byte beat: {h}"
        beats = 1 if h["kind"] == Kind.READ_REQ.value else h["length"] // beat_bytes
        assert len(packet) == beats, f"pcie_o packet of {len(packet)} beats for {h}"
        assert all(b.hdr == h for b in packet), f"pcie_o packet with mixed headers: {packet}"
        assert [b.first for b in packet] == [1] + [0] * (beats - 1), f"pcie_o first flags {packet}"
        assert h["kind"] in (Kind.READ_REQ.value, Kind.WRITE_REQ.value) and \
            (h["aes"] == 0 or h["key_index"] < 16)

    def busy(self):
        """Something is still on its way: a tile program, a packet in a tile's outbox or
        in a source, a frame awaiting its verdict, a read the host has not answered, or a
        write request not yet stored by the host (posted writes drain before a phase
        ends, so the runtime reads a complete checkpoint)."""
        return (any(t.busy or t.outbox for t in self.tiles.values()) or self._verdicts or
                self.host.outstanding or self.xb_src.queue or self.cpl_src.queue or
                self.writes_sent != self.writes_stored)

    async def run(self, job, max_cycles=2_000_000):
        """Run *job* (tile -> callable(tile) -> generator) to the end; returns the cycles
        taken; raises the security exception if one halted the tiles (HELD if the CCU
        holds them)."""
        if self.held:
            raise SecurityException(Cause.HELD, None, "the CCU holds the tiles")
        for t, program in job.items():
            self.tiles[t].run(program(self.tiles[t]))
        start = self.now
        while self.busy() and self.exception is None:
            await RisingEdge(self.clk)
            if self.now - start > max_cycles:
                raise AssertionError(f"tiles still busy after {max_cycles} cycles")
            halted = [t.exception for t in self.tiles.values() if t.exception is not None]
            if halted and self.exception is None:
                self._halt_all(halted[0].cause, str(halted[0]))
                self.exception = halted[0]
        if self.exception is not None:
            raise self.exception
        return self.now - start


# ================================================================== the CCU's port
# The CCU firmware model's port (:class:`sw.ccu.sxp_port.CcuPort`) on the RTL.
#
# :class:`sw.ccu.cce.Cce` is synchronous Python; the RTL moves only while cocotb runs. The
# CCU's calls therefore run in a cocotb *bridge* thread (:func:`cocotb.task.bridge`), and
# each port operation that touches the RTL is a coroutine the thread waits for
# (:func:`cocotb.task.resume`): a CSR write or read on the SXP's ``ccu`` port takes the
# clock cycles it takes, in simulated time, while the CCU code waits as firmware does.
#
# :class:`RtlCcuPort` is :class:`sw.itx.csr.CsrKeyPort` (the register encoding written once,
# the configuration read-back included) over three bridged bus operations — write, read,
# wait for STATUS.key_busy = 0 — plus the tile hold, which here is the testbench's
# (:meth:`tb.system.env.SystemTB.hold`: every tile halts and issues nothing more until the
# next reset), as the ICU's hold pin would be in a device.
#
# Use: ``await run_ccu(lambda: cce.create_tee(...))`` runs one piece of CCU code to its end.


class RtlCcuPort(CsrKeyPort):
    """The CCU port of a :class:`tb.system.env.SystemTB`; call it only from code run by
    :func:`run_ccu`. ``installed`` keeps every non-zero key the CCU installed (the
    checkpoint key is derived inside the CCU: a test learns it only here), so that a scan
    can look for all of them afterwards. ``writes`` and ``reads`` count the CSR operations
    (a test asserts that a refused manifest caused none)."""

    def __init__(self, tb):
        bus = tb.ccu_csr
        self.reads = self.writes = 0
        self.installed = []

        def write32(addr, value):
            self.writes += 1
            resume(bus.write_now)(addr, value)

        def read32(addr):
            self.reads += 1
            return resume(bus.read)(addr)

        super().__init__(write32, tb.contexts, wait_key_idle=resume(bus.key_idle),
                         read32=read32, hold=tb.hold)

    def install_key(self, phys_ctx, key):
        if any(key):
            self.installed.append(bytes(key))
        super().install_key(phys_ctx, key)


async def run_ccu(call):
    """Run the synchronous CCU code *call()* in a bridge thread while the simulation goes
    on; returns what it returns (its exception is raised here)."""
    return await bridge(call)()
