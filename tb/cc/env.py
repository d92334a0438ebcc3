"""Testbench plumbing of the ``cc`` block: ``cc_ctrl``, ``cc_dma`` and ``gpu_cc``.

- :class:`CtrlTB` (``cc_ctrl``): the CSR buses (:class:`tb.common.csr.CsrBus`), the
  ``flr``/``mode_nv`` pins, the memory streams, and a per-cycle scoreboard against
  :class:`sw.cc.model.CCCtrlModel`: every cycle the monitor (in the ReadOnly phase) first
  compares the block's outputs (``mode``, ``mode_store``, ``ready``, ``fault``, ``key``,
  read data of last cycle's reads, memory responses) with the model, then feeds the model
  what the ports carry in this cycle (:class:`CtrlChecks`, which a top embedding
  ``cc_ctrl`` reuses: tb/cc/test_gpu_cc_regs.py).
- :class:`DmaTB` (``cc_dma``): a memory (Python dict) behind the ``rd_req`` / ``rd_resp`` /
  ``wr`` streams with random latency, idle cycles and back-pressure on every stream;
  descriptors and keys in; statuses checked in order against
  :class:`sw.cc.model.CCDmaModel`, which runs on its own copy of the memory (compared at
  the end of every batch). :class:`Timeline` records the transfers per cycle.
- :class:`GpuTB` (``gpu_cc``), built on :class:`DmaTB` with ``gpu_cc``'s regions
  (protected memory = ``cc_ctrl``'s ``[0, protected)``, the bounce buffer in host memory);
  the CSR buses ``host`` and ``fw`` (no ``cc_ctrl`` model checks them: the DMA writes
  device memory behind its back); keys through the firmware port only
  (:meth:`GpuTB.install`); device memory is ``cc_ctrl``'s memory, loaded and read through
  its simulator handle (``ctrl.mem``); the external device-memory port (``mem_req`` /
  ``mem_resp``) is driven for the firewall checks. CC off runs ``gpu_cc``'s plain copy
  engine: the expected status and memory effect come from :func:`plain_copy`, a reference
  written here from the contract (docs/cc.md).
- ``gpu_cc``'s RTS and ready state: :meth:`GpuTB.rts_extend` / :meth:`GpuTB.rts_read` (the
  firmware port's RTS window, the ``fw_id`` pins as the initiator), :meth:`GpuTB.set_ready`
  (the CVM's ``GPU_READY`` write; ``GpuTB(auto_ready=True)`` does it after every power-on
  and FLR into CC on / devtools), and the attestation steps :func:`measured_boot`,
  :func:`recording_rng`, :func:`install_session_keys`.
- Stimulus shared by the DMA tests of both designs: :class:`Alloc`, :func:`install_channels`,
  :func:`fill`, :func:`outbound`, :func:`inbound`, :func:`sealed`, :func:`traffic`, and the
  secrets a frame leaves for the reset-scrub scans (:func:`frame_secrets`).
"""
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.cc.layout import (
    Dir,
    Mode,
    Status,
    desc_layout,
    dma_key_layout,
    mem_req_layout,
    mem_resp_layout,
    rd_req_layout,
    rd_resp_layout,
    status_layout,
    wr_layout,
)
from hw.cc.regs import (
    DMA_KEY_CTRL,
    DMA_KEY_GO,
    DMA_KEY_IV,
    DMA_KEY_STATUS,
    GPU_READY,
    RTS_COUNT,
    RTS_CTRL,
    RTS_DATA,
    RTS_EXTEND,
    RTS_READ,
    RTS_REFUSED,
    RTS_SLOTS,
    RTS_STATUS,
    RTS_WORDS,
    field_values,
    gpu_register_map,
    register_map,
)
from sw.cc.host import HostChannel, blocks, iv_block
from sw.cc.model import Bus, CCCtrlModel, CCDmaModel, Desc
from tb.common.csr import CsrBus
from tb.common.payload import pack, unpack
from tb.common.scrub import bytes_secret, gcm_frame_secrets, gcm_key_secrets
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, random_pause
from tb.common.tb import TB

from .cover import CtrlCoverage

PARAMS = params()
# cc_ctrl (and gpu_cc's cc_ctrl)
DEPTH = PARAMS.get("depth", 256)
PROTECTED = PARAMS.get("protected", DEPTH * 3 // 4)
CTRL_ADDR_BITS = (DEPTH - 1).bit_length()
REQ, RESP = mem_req_layout(CTRL_ADDR_BITS), mem_resp_layout
REG = {r.name: r.addr for r in register_map()}
# cc_dma (and gpu_cc's cc_dma)
CHANNELS = PARAMS.get("channels", 4)
FRAME_BLOCKS = PARAMS.get("frame_blocks", 64)
ADDR_BITS = PARAMS.get("addr_bits", 32)
DESC, STATUS, KEY = desc_layout(ADDR_BITS), status_layout, dma_key_layout
RD_REQ, RD_RESP, WR = rd_req_layout(ADDR_BITS), rd_resp_layout, wr_layout(ADDR_BITS)
# gpu_cc
HOST_BASE = 1 << (ADDR_BITS - 1)            # GpuCC.host_base: host memory from here up
GPU_REGS = gpu_register_map()               # gpu_cc's own registers, decoded by the map


# ================================================================== cc_ctrl
class CtrlChecks:
    """The ``cc_ctrl`` scoreboard, for ``cc_ctrl`` itself (:class:`CtrlTB`) and for a top
    that embeds it (``gpu_cc``): every cycle it compares the read data of last cycle's reads,
    ``mode``, ``mode_store``, ``ready``, ``fault`` (and ``key``) and every external memory
    response with :class:`sw.cc.model.CCCtrlModel`, then feeds the model what the ``host``,
    ``fw`` and ``mem_req`` ports carry. The class using it has ``dut``, ``clk``, ``host``
    and ``fw`` and calls :meth:`_start_ctrl_checks`; a top that embeds ``cc_ctrl`` says
    how it differs (:attr:`KEY_OUTPUT`, :attr:`FW_OWN`, :meth:`_src_code`)."""

    KEY_OUTPUT = True     # cc_ctrl's ``key`` output is a port of the top
    FW_OWN = ()           # firmware addresses the top answers itself: idle cycles to the model
    HOST_OWN = ()         # host addresses the top answers itself (never reach cc_ctrl): idle too

    def _src_code(self, src):
        """The initiator code ``cc_ctrl`` sees for a ``mem_req`` whose ``src`` is *src*."""
        return src

    def _start_ctrl_checks(self):
        self.model = CCCtrlModel(DEPTH, PROTECTED)
        self.expect_resp = deque()
        self.responses = []            # (request, RTL response dict) in order
        self.pending_reads = []        # (port, addr, model value) checked next cycle
        self.errors = []
        self.cycle = self.reads_checked = 0
        cocotb.start_soon(self._ctrl_monitor())

    # hooks for the testbench's own bookkeeping
    def _on_power_on(self):
        pass

    def _on_cycle(self, flr, req):
        pass

    def _on_request(self, req):
        pass

    def _after_cycle(self):
        pass

    @staticmethod
    def _bus(port):
        """What *port* carries this cycle (the pins, sampled in ReadOnly)."""
        r_stb, w_stb = int(port.r_stb.value), int(port.w_stb.value)
        if not (r_stb or w_stb):
            return Bus()
        return Bus(r_stb, w_stb, int(port.addr.value), int(port.w_data.value))

    def _check_reads(self):
        for port, addr, want in self.pending_reads:
            got = int(port.r_data.value)
            self.reads_checked += 1
            if got != want:
                self.errors.append(f"cycle {self.cycle}: {port.name} read {addr:#04x} = "
                                   f"{got:#x}, model {want:#x}")
        self.pending_reads = []

    def _check_outputs(self):
        dut, m = self.dut, self.model
        outs = {"mode": m.active.value, "mode_store": m.store.value, "ready": int(m.ready),
                "fault": m.fault}
        if self.KEY_OUTPUT:
            outs["key"] = m.key
        for name, want in outs.items():
            got = int(getattr(dut, name).value)
            if got != want:
                self.errors.append(f"cycle {self.cycle}: {name} = {got:#x}, model {want:#x}")

    def _mem_transfer(self):
        """The ``mem_req`` transfer of this cycle as ``cc_ctrl`` sees it (or None), and
        whether a response was taken (checked against the model's)."""
        dut = self.dut
        req = None
        if int(dut.mem_req__valid.value) and int(dut.mem_req__ready.value):
            p = unpack(REQ, dut.mem_req__payload.value)
            req = (self._src_code(getattr(p["src"], "value", p["src"])), p["addr"], p["write"],
                   p["data"])
        take = bool(int(dut.mem_resp__valid.value) and int(dut.mem_resp__ready.value))
        if take:
            got = unpack(RESP, dut.mem_resp__payload.value)
            if not self.expect_resp:
                self.errors.append(f"cycle {self.cycle}: response with none expected")
            else:
                request, want = self.expect_resp.popleft()
                if (got["data"], got["ok"]) != want:
                    self.errors.append(f"cycle {self.cycle}: response to {request} = "
                                       f"({got['data']:#x}, {got['ok']}), model {want}")
                self.responses.append((request, got))
        return req, take

    async def _ctrl_monitor(self):
        dut, m = self.dut, self.model
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.cycle += 1
            self._check_reads()
            if int(dut.rst.value):
                m.power_on(int(dut.mode_nv.value))
                self._on_power_on()
                self.expect_resp.clear()
                continue
            self._check_outputs()
            flr = int(dut.flr.value)
            hbus, fbus = self._bus(self.host), self._bus(self.fw)
            if fbus.addr in self.FW_OWN:
                fbus = Bus()
            if hbus.addr in self.HOST_OWN:
                hbus = Bus()
            req, take = self._mem_transfer()
            self._on_cycle(flr, req)
            try:
                out = m.step(flr, hbus, fbus, req, take)
            except AssertionError as e:
                self.errors.append(f"cycle {self.cycle}: {e}")
                continue
            if req is not None:
                self._on_request(req)
                self.expect_resp.append((req, out["resp"]))
            if flr and self.expect_resp:
                self.expect_resp.clear()       # an flr drops the response in flight
            for port, bus, key in ((self.host, hbus, "host"), (self.fw, fbus, "fw")):
                if bus.r_stb:
                    self.pending_reads.append((port, bus.addr, out[key]))
            self._after_cycle()


class CtrlTB(TB, CtrlChecks):
    def __init__(self, dut, idle=0.0, stall=0.0):
        super().__init__(dut)
        self.host = CsrBus(dut, "host", self.clk)
        self.fw = CsrBus(dut, "fw", self.clk)
        self.src = StreamSource(dut, "mem_req", self.clk)
        self.sink = StreamSink(dut, "mem_resp", self.clk)
        if idle:
            for p in (self.host, self.fw):
                p.set_pause(random_pause(idle))
            self.src.set_pause(random_pause(idle))
        if stall:
            self.sink.set_pause(random_pause(stall))
        dut.flr.value = 0
        dut.mode_nv.value = 0
        self.flr_queue = 0
        self.req_log = deque()
        self.eeprom = Mode.OFF         # the board's EEPROM bit
        self.cover = CtrlCoverage()    # functional cover points (tb/cc/cover.py)
        cocotb.start_soon(self._flr_driver())
        self._start_ctrl_checks()

    # ------------------------------------------------------------------ stimulus
    async def power_on(self, mode_nv):
        """``rst`` with ``mode_nv`` = *mode_nv* (the EEPROM content), then wait for the
        power-on scrub."""
        self.dut.mode_nv.value = getattr(mode_nv, "value", mode_nv)
        self.src.clear()
        await self.reset()
        await self.wait_ready()

    async def _flr_driver(self):
        while True:
            await RisingEdge(self.clk)
            if self.flr_queue:
                self.flr_queue -= 1
                self.dut.flr.value = 1
            else:
                self.dut.flr.value = 0

    async def flr(self, wait=True):
        self.flr_queue += 1
        while self.flr_queue:
            await RisingEdge(self.clk)
        await RisingEdge(self.clk)
        if wait:
            await self.wait_ready()


    def mem(self, src, addr, write=0, data=0):
        self.req_log.append((getattr(src, 'value', src), addr, write, data))
        self.src.send(pack(REQ, src=src, addr=addr, write=write, data=data))

    async def mem_idle(self, timeout=100_000):
        for _ in range(timeout):
            if self.src.empty() and not self.expect_resp and not self.req_log:
                self.src.clear()               # zero the payload lines (no secret lingers)
                return
            await RisingEdge(self.clk)
        raise AssertionError(f"memory port not idle: {len(self.expect_resp)} responses missing")

    async def mem_access(self, src, addr, write=0, data=0):
        n = len(self.responses)
        self.mem(src, addr, write, data)
        await self.mem_idle()
        return self.responses[n][1]

    def check(self):
        assert not self.errors, f"{len(self.errors)} mismatches with the model, first: " + \
            "; ".join(self.errors[:3])

    # ------------------------------------------------------------------ scoreboard hooks
    def _on_power_on(self):
        self.cover.power_on()

    def _on_cycle(self, flr, req):
        self.cover.cycle(self.model, flr, req)

    def _on_request(self, req):
        self.req_log.popleft()

    def _after_cycle(self):
        if int(self.dut.mode_store.value) != self.eeprom.value:
            self.eeprom = Mode(int(self.dut.mode_store.value))   # the board writes it back


# ================================================================== cc_dma
PROT = (0x1000, 0x9000)          # protected memory, block addresses [base, limit)
BOUNCE = (0x20000, 0x30000)      # bounce buffer


class DmaTB(TB):
    """The regions are class attributes (``PROT``/``BOUNCE``) so that a top embedding
    ``cc_dma`` (``gpu_cc``, :class:`GpuTB`) reuses this plumbing with its own; a top
    without the ``key`` stream or the region inputs (keys and regions set inside) has
    ``key_src`` None and overrides :meth:`install`."""
    PROT, BOUNCE = PROT, BOUNCE

    def __init__(self, dut, idle=0.0, stall=0.0, latency=(1, 6)):
        super().__init__(dut)
        self.desc_src = StreamSource(dut, "desc", self.clk)
        self.key_src = StreamSource(dut, "key", self.clk) if hasattr(dut, "key__valid") else None
        self.resp_src = StreamSource(dut, "rd_resp", self.clk)
        self.status_sink = StreamSink(dut, "status", self.clk)
        self.req_sink = StreamSink(dut, "rd_req", self.clk)
        self.wr_sink = StreamSink(dut, "wr", self.clk)
        if idle:
            for s in (self.desc_src, self.resp_src):
                s.set_pause(random_pause(idle))
        if stall:
            for s in (self.status_sink, self.req_sink, self.wr_sink):
                s.set_pause(random_pause(stall))
        self.latency = latency
        if hasattr(dut, "prot_base"):
            dut.prot_base.value, dut.prot_limit.value = self.PROT
        dut.bb_base.value, dut.bb_limit.value = self.BOUNCE
        self.model = CCDmaModel(CHANNELS, FRAME_BLOCKS, self.PROT, self.BOUNCE)
        self.mem = {}            # the RTL's memory
        self.model_mem = {}      # the model's copy
        self.expected = deque()  # (tag, code, ctr, label)
        self.statuses = []       # (label, status dict)
        self.writes = []         # (addr, data) of every wr transfer
        self.reads = 0
        self.errors = []
        self.cycle = 0
        self._pending = deque()  # (due cycle, data)
        self._hold_responses = False    # True while a reset with stale reads runs
        self.stale_responses = 0        # responses to pre-reset reads, at the last reset
        cocotb.start_soon(self._memory())
        cocotb.start_soon(self._status())

    # ------------------------------------------------------------------ memory
    async def _memory(self):
        while True:
            await RisingEdge(self.clk)
            self.cycle += 1
            self._answer_requests()
            while self._pending and self._pending[0][0] <= self.cycle and not self._hold_responses:
                self.resp_src.send(pack(RD_RESP, data=self._pending.popleft()[1]))
            while self.wr_sink.queue:
                w = unpack(WR, self.wr_sink.queue.popleft())
                self.mem[w["addr"]] = w["data"]
                self.writes.append((w["addr"], w["data"]))

    def _deliver_late(self):
        """After a reset or FLR run with ``_hold_responses`` set: the responses to every
        read issued before it (requests the sink caught up to the reset edge included)
        arrive spread over the next 100 cycles."""
        self._answer_requests()
        start, n = self.cycle + 1, len(self._pending) + len(self.resp_src.queue)
        self._pending = deque((start + k * 100 // max(1, n), d)
                              for k, (_, d) in enumerate(self._pending))
        self.stale_responses = n
        self._hold_responses = False

    def _answer_requests(self):
        while self.req_sink.queue:
            addr = unpack(RD_REQ, self.req_sink.queue.popleft())["addr"]
            self.reads += 1
            due = self.cycle + random.randint(*self.latency)
            if self._pending:
                due = max(due, self._pending[-1][0])
            self._pending.append((due, self.mem.get(addr, 0)))

    async def _status(self):
        while True:
            raw = await self.status_sink.recv(timeout_cycles=1 << 30)
            got = unpack(STATUS, raw)
            if not self.expected:
                self.errors.append(f"status with no descriptor outstanding: {got}")
                continue
            tag, code, ctr, label = self.expected.popleft()
            want = {"tag": tag, "code": code, "ctr": ctr}
            if got != want:
                self.errors.append(f"descriptor {label}: RTL status {fmt(got)} != model {fmt(want)}")
            self.statuses.append((label, got))

    def poke(self, addr, data):
        """Host or engine writes memory directly (both copies)."""
        self.mem[addr] = data
        self.model_mem[addr] = data

    # ------------------------------------------------------------------ stimulus
    async def install(self, ch, key, iv=0):
        """Key through the trusted port (waits until it is taken)."""
        self.key_src.send(pack(KEY, ch=ch, key=int.from_bytes(key, "little"), iv=iv))
        await self.key_src.wait_idle()
        self.model.install_key(ch, key, iv)

    def submit(self, d, label=None):
        code, ctr = self.model.process(d, self.model_mem)
        self.expected.append((d.tag, code, ctr, label if label is not None else d.tag))
        self.desc_src.send(pack(DESC, **d.fields()))
        return code

    async def drain(self, timeout=500_000):
        for _ in range(timeout):
            if not self.expected and self.desc_src.empty():
                break
            await RisingEdge(self.clk)
        else:
            raise AssertionError(f"not drained: {len(self.expected)} statuses missing")
        await RisingEdge(self.clk)
        self.check()

    def check(self):
        assert not self.errors, f"{len(self.errors)} mismatches, first: " + "; ".join(self.errors[:3])
        keys = set(self.mem) | set(self.model_mem)
        bad = [a for a in keys if self.mem.get(a, 0) != self.model_mem.get(a, 0)]
        assert not bad, f"memory differs from the model at {len(bad)} blocks, first {hex(min(bad))}"

    async def reset(self, cycles=2, stale=False):
        """Reset the DUT and the model. Memory forgets the reads in flight, or with
        *stale* answers them anyway (a memory that does not see the FLR): every response
        to a read issued before the reset arrives after it, spread over its first 100
        cycles, inside the reset scrub during which the DMA must drop them."""
        for s in (self.desc_src, self.key_src):
            if s is not None:
                s.clear()
        if not stale:
            self.resp_src.clear()
            self._pending.clear()
        self._hold_responses = stale
        await super().reset(cycles)
        if stale:
            self._deliver_late()
        else:
            self.req_sink.clear()
            self._pending.clear()
            self.resp_src.clear()
        self.model.reset()
        self.expected.clear()


class Timeline:
    """Per-cycle record of the transfers on ``desc``, ``rd_resp``, ``wr`` and ``status``,
    sampled in the ``ReadOnly`` phase (a transfer seen there happens at the next edge;
    every port is numbered the same way, so cycles compare). Its first sample is in the
    cycle after the next edge: start it, then let one edge pass before queueing the first
    descriptor, or a descriptor the source takes at once is missed."""

    def __init__(self, dut, clk):
        self.dut, self.clk = dut, clk
        self.cycle = 0
        self.desc, self.rd_resp, self.status = [], [], []   # cycles
        self.wr = []                                        # (cycle, addr)
        self._task = cocotb.start_soon(self._run())

    def stop(self):
        self._task.cancel()

    async def _run(self):
        dut = self.dut
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.cycle += 1
            c = self.cycle
            if int(dut.desc__valid.value) and int(dut.desc__ready.value):
                self.desc.append(c)
            if int(dut.rd_resp__valid.value) and int(dut.rd_resp__ready.value):
                self.rd_resp.append(c)
            if int(dut.wr__valid.value) and int(dut.wr__ready.value):
                self.wr.append((c, unpack(WR, dut.wr__payload.value)["addr"]))
            if int(dut.status__valid.value) and int(dut.status__ready.value):
                self.status.append(c)


def fmt(d):
    return {k: (f"{v:#x}" if isinstance(v, int) and v > 9 else getattr(v, "name", v)) for k, v in d.items()}


def read_frame(mem, addr, n):
    return b"".join(mem.get(addr + k, 0).to_bytes(16, "little") for k in range(n))


# ================================================================== gpu_cc
def plain_copy(d, mem, prot, bounce):
    """What the CC-off copy engine must do with descriptor *d* on memory *mem*: (code, ctr)."""
    if d.len == 0:
        return Status.LENGTH, 0

    def inside(a, region):
        return region[0] <= a and a + d.len <= region[1]

    src_r, dst_r = (prot, bounce) if d.dir is Dir.OUT else (bounce, prot)
    if not (inside(d.src, src_r) and inside(d.dst, dst_r)):
        return Status.REGION, 0
    for k in range(d.len):
        mem[d.dst + k] = mem.get(d.src + k, 0)
    return Status.OK, 0


class GpuTB(DmaTB):
    PROT = (0, PROTECTED)
    BOUNCE = (HOST_BASE + 0x1000, HOST_BASE + 0x9000)

    def __init__(self, dut, idle=0.0, stall=0.0, latency=(1, 6), auto_ready=True):
        super().__init__(dut, idle, stall, latency)
        self.host = CsrBus(dut, "host", self.clk)
        self.fw = CsrBus(dut, "fw", self.clk)
        self.ext_src = StreamSource(dut, "mem_req", self.clk)
        self.ext_sink = StreamSink(dut, "mem_resp", self.clk)
        dut.flr.value = 0
        dut.mode_nv.value = 0
        dut.fw_id.value = 0
        self.off = True             # the active mode is CC off (the plain copy engine)
        # *auto_ready*: after every power-on and FLR into CC on / devtools the host sets
        # GPU_READY at once (the tests about the DMA itself); the ready-state tests say False
        self.auto_ready = auto_ready

    # ------------------------------------------------------------------ reset, mode
    def _forget(self, stale=False, statuses=True):
        """A reset or FLR aborts everything in flight: no answer to a request from before it
        (with *stale*, host memory answers them all the same, see :meth:`flr`); and it
        scrubs device memory (the reference follows). *statuses*: forget the statuses still
        expected too (not before the FLR edge: a frame may still complete up to it)."""
        for s in (self.desc_src, self.ext_src):
            s.clear()
        if not stale:
            self.resp_src.clear()
            self.req_sink.clear()
            self._pending.clear()
        if statuses:
            self.model.reset()
            self.expected.clear()
        self.model_mem = {a: (v if a >= HOST_BASE else 0) for a, v in self.model_mem.items()}


    async def power_on(self, mode):
        self.dut.mode_nv.value = mode.value
        self._forget()
        await self.reset()
        await self.wait_ready()
        self.off = Mode(int(self.dut.mode.value)) is Mode.OFF
        assert int(self.dut.mode.value) == mode.value, f"power-on mode {int(self.dut.mode.value)}, not {mode}"
        await self._auto_ready()

    async def _auto_ready(self):
        if self.auto_ready and not self.off:
            await self.set_ready()

    async def set_ready(self, value=1):
        """The CVM's write of GPU_READY (host port)."""
        await self.host.write(GPU_READY, value)

    async def ready_reg(self, port=None):
        """GPU_READY as *port* (default: the host) reads it: {"ready", "held"}."""
        return field_values(GPU_REGS["GPU_READY"], await (port or self.host).read(GPU_READY))

    async def flr(self, wait=True, stale=False):
        """One-cycle FLR strobe; the testbench forgets what was in flight, as the RTL does.
        With *stale*, host memory does not see the FLR: it answers every read issued before
        it, after it, spread over its first 100 cycles (during cc_ctrl's scrub, when
        ``gpu_cc`` takes and drops host read responses)."""
        self._forget(stale, statuses=False)     # a status may still be taken up to the FLR edge
        self._hold_responses = stale
        await RisingEdge(self.clk)
        self.dut.flr.value = 1
        await RisingEdge(self.clk)
        self.dut.flr.value = 0
        self._forget(stale)         # requests the sink caught up to the FLR edge too
        if stale:
            self._deliver_late()
        if wait:
            await self.wait_ready()
            await self.settle_mode()

    async def settle_mode(self):
        await ReadOnly()
        self.off = Mode(int(self.dut.mode.value)) is Mode.OFF
        await RisingEdge(self.clk)
        await self._auto_ready()

    async def set_mode(self, mode):
        """The in-band tool's way: write the mode store from the host, then an FLR."""
        await self.host.write(REG["CC_MODE_SET"], mode.value)
        await self.flr()
        assert int(self.dut.mode.value) == mode.value, f"mode {int(self.dut.mode.value)} after the FLR, not {mode}"

    # ------------------------------------------------------------------ keys
    async def write_key_regs(self, port, key):
        value = int.from_bytes(key, "little")
        for k in range(8):
            await port.write(REG[f"KEY{k}"], (value >> 32 * k) & 0xFFFF_FFFF)

    async def key_status(self):
        return field_values(GPU_REGS["DMA_KEY_STATUS"], await self.fw.read(DMA_KEY_STATUS))

    async def install(self, ch, key, iv=0, expect=True):
        """The firmware's install: KEY0..7, DMA_KEY_IV, go on DMA_KEY_CTRL, wait until the
        engine took it, then zero KEY0..7 (the key then lives only in the engine)."""
        await self.write_key_regs(self.fw, key)
        await self.fw.write(DMA_KEY_IV, iv)
        await self.fw.write(DMA_KEY_CTRL, DMA_KEY_GO | ch)
        for _ in range(10_000):
            st = await self.key_status()
            if not st["busy"]:
                break
        else:
            raise AssertionError(f"key install on channel {ch} never completed")
        await self.write_key_regs(self.fw, bytes(32))
        if expect:
            self.model.install_key(ch, key, iv)

    # ------------------------------------------------------------------ RTS (firmware port)
    async def rts_wait(self, port=None):
        """Poll RTS_STATUS until the request in flight is answered; returns the status dict."""
        for _ in range(1000):
            st = field_values(GPU_REGS["RTS_STATUS"], await (port or self.fw).read(RTS_STATUS))
            if not st["busy"]:
                return st
        raise AssertionError("RTS_STATUS.busy never cleared")

    async def rts_extend(self, slot, value, fw_id):
        """An RTM's extend: RTS_DATA0..11 = *value* (48 bytes), then RTS_CTRL extend | slot,
        all issued by the firmware initiator *fw_id* (the fw_id pins: the bus's source id,
        which hardware sets). Returns True if the store refused it for the owner lock."""
        assert len(value) == 48
        self.dut.fw_id.value = fw_id
        for k in range(RTS_WORDS):
            await self.fw.write(RTS_DATA + 4 * k, int.from_bytes(value[4 * k:4 * k + 4], "little"))
        await self.fw.write(RTS_CTRL, RTS_EXTEND | slot)
        st = await self.rts_wait()
        self.dut.fw_id.value = 0
        return bool(st["refused"])

    async def rts_read(self, slot, port=None):
        """The RTR's read of *slot* through the RTL: {"value": 48 bytes, "owner", "bound", "count"}."""
        port = port or self.fw
        await port.write(RTS_CTRL, RTS_READ | slot)
        st = await self.rts_wait(port)
        words = [await port.read(RTS_DATA + 4 * k) for k in range(RTS_WORDS)]
        return {"value": b"".join(w.to_bytes(4, "little") for w in words), "owner": st["owner"],
                "bound": st["bound"], "count": await port.read(RTS_COUNT)}

    async def rts_read_all(self):
        return [await self.rts_read(k) for k in range(RTS_SLOTS)]

    async def rts_refused(self):
        return await self.fw.read(RTS_REFUSED)

    # ------------------------------------------------------------------ memory
    def poke(self, addr, data):
        if addr >= HOST_BASE:
            self.mem[addr] = data
        else:
            self.dut.ctrl.mem[addr].value = data
        self.model_mem[addr] = data

    def dev(self, addr):
        return int(self.dut.ctrl.mem[addr].value)

    def read(self, addr):
        return self.mem.get(addr, 0) if addr >= HOST_BASE else self.dev(addr)

    async def ext_access(self, src, addr, write=0, data=0):
        """One access on the external device-memory port; returns the response dict."""
        self.ext_src.send(pack(REQ, src=src, addr=addr, write=write, data=data))
        return unpack(RESP, await self.ext_sink.recv(timeout_cycles=20_000))

    # ------------------------------------------------------------------ descriptors
    def submit(self, d, label=None):
        if self.off:
            code, ctr = plain_copy(d, self.model_mem, self.PROT, self.BOUNCE)
            self.expected.append((d.tag, code, ctr, label if label is not None else d.tag))
            self.desc_src.send(pack(DESC, **d.fields()))
            return code
        return super().submit(d, label)

    def check(self):
        assert not self.errors, f"{len(self.errors)} mismatches, first: " + "; ".join(self.errors[:3])
        bad = [a for a in set(self.mem) | set(self.model_mem)
               if self.read(a) != self.model_mem.get(a, 0)]
        assert not bad, f"memory differs from the reference at {len(bad)} blocks, first {hex(min(bad))}"


# ================================================================== DMA stimulus
class Alloc:
    """Disjoint block ranges in a region (descriptors in flight must not overlap)."""

    def __init__(self, region):
        self.base, self.limit = region
        self.next = self.base

    def take(self, n):
        if self.next + n > self.limit:
            self.next = self.base
        a, self.next = self.next, self.next + n
        return a


async def install_channels(tb, keyless=()):
    chans = {}
    for ch in range(CHANNELS):
        if ch in keyless:
            continue
        key, iv = random.randbytes(32), random.randrange(1000)
        await tb.install(ch, key, iv)
        chans[ch] = HostChannel(key, ch, iv)
    return chans


def fill(tb, addr, n):
    data = random.randbytes(16 * n)
    for k, b in enumerate(blocks(data)):
        tb.poke(addr + k, b)
    return data


def outbound(tb, prot, bounce, ch, n, tag):
    src, dst = prot.take(n), bounce.take(n + 2)
    pt = fill(tb, src, n)
    d = Desc(Dir.OUT, ch, n, src, dst, tag)
    return d, pt


def inbound(tb, chans, prot, bounce, ch, n, tag, how="ok"):
    """An IN descriptor over a frame the host sealed (*how*: ok, tamper, replay, badiv)."""
    src, dst = bounce.take(n + 2), prot.take(n)
    h = chans[ch]
    pt = random.randbytes(16 * n)
    if how == "replay":
        frame = h.seal(pt, ctr=max(h.tx - 1, 0)) if h.tx else h.seal(pt)
    else:
        frame = bytearray(h.seal(pt))
        if how == "tamper":
            bit = random.randrange(16 * 8, len(frame) * 8)      # ciphertext or tag
            frame[bit // 8] ^= 1 << bit % 8
        elif how == "badiv":
            frame[random.choice([4, 5, 6, 12])] ^= 1 << random.randrange(8)
        frame = bytes(frame)
    for k, b in enumerate(blocks(frame)):
        tb.poke(src + k, b)
    return Desc(Dir.IN, ch, n, src, dst, tag), pt


def check_outbound(tb, chans, done):
    """Every OUT frame the RTL wrote opens on the host (OpenSSL), counters growing."""
    for d, pt in done:
        label, st = next((lab, s) for lab, s in tb.statuses if lab == d.tag)
        if st["code"] != Status.OK:
            continue
        frame = read_frame(tb.mem, d.dst, d.len + 2)
        assert chans[d.ch].open(frame) == pt, f"descriptor {d.tag}: host decryption differs"


def frame_secrets(tb, key, d, pt, frame=None):
    """What a frame leaves in the engine: E_K(J0), the GHASH partial hashes and its
    plaintext. An IN *frame* is the host's sealed bytes (it may be tampered: the engine
    hashes what it reads); an OUT frame's counter is the model's (its expected status)."""
    label = f"desc {d.tag}"
    if d.dir is Dir.IN:
        nonce, data, decrypt = frame[:12], blocks(frame[16:-16]), True
    else:
        ctr = tb.expected[-1][2]
        nonce, data, decrypt = iv_block(ctr, Dir.OUT, d.ch)[:12], blocks(pt), False
    return gcm_frame_secrets(key, nonce, data, decrypt, label) + \
        [bytes_secret("plaintext", f"{label} plaintext", pt)]


def sealed(tb, chans, prot, bounce, ch, n, tag, tamper=False):
    """An IN descriptor over a frame the host sealed (optionally with a ciphertext bit
    flipped: its plaintext is decrypted into staging and never authenticated)."""
    src, dst = bounce.take(n + 2), prot.take(n)
    pt = random.randbytes(16 * n)
    frame = bytearray(chans[ch].seal(pt))
    if tamper:
        bit = random.randrange(16 * 8, (len(frame) - 16) * 8)       # the ciphertext
        frame[bit // 8] ^= 1 << bit % 8
    for k, b in enumerate(blocks(bytes(frame))):
        tb.poke(src + k, b)
    return Desc(Dir.IN, ch, n, src, dst, tag), pt, bytes(frame)


async def traffic(tb, chans, keys, prot, bounce, tag0, count):
    """*count* frames on every channel, both directions, one IN frame tampered; returns
    their secrets."""
    secrets = []
    for k in range(count):
        for ch in range(CHANNELS):
            tag = (tag0 + k * CHANNELS + ch) & 0xFF
            n = random.randint(FRAME_BLOCKS // 2, FRAME_BLOCKS)
            if (k + ch) % 2:
                d, pt = outbound(tb, prot, bounce, ch, n, tag)
                tb.submit(d)
                secrets += frame_secrets(tb, keys[ch], d, pt)
            else:
                d, pt, frame = sealed(tb, chans, prot, bounce, ch, n, tag, tamper=k == ch == 0)
                tb.submit(d)
                secrets += frame_secrets(tb, keys[ch], d, pt, frame)
    return secrets


async def traffic_under_new_keys(tb, chans, prot, bounce, iv, tag0):
    """After a reset or FLR: a new random key on every channel (first IV *iv*), then on
    each channel an OUT frame and an IN frame, each drained and checked against the model
    before the next (one at a time: a small protected region makes the allocator reuse
    addresses) — a stale beat taken for data, or state left over, shows as a mismatch."""
    for ch in range(CHANNELS):
        key = random.randbytes(32)
        await tb.install(ch, key, iv)
        chans[ch] = HostChannel(key, ch, iv)
    for ch in range(CHANNELS):
        n = random.randint(1, FRAME_BLOCKS)
        d, _ = outbound(tb, prot, bounce, ch, n, (tag0 + 2 * ch) & 0xFF)
        tb.submit(d)
        await tb.drain()
        d, _, _ = sealed(tb, chans, prot, bounce, ch, n, (tag0 + 2 * ch + 1) & 0xFF)
        tb.submit(d)
        await tb.drain()
    codes = [s["code"] for _, s in tb.statuses[-2 * CHANNELS:]]
    assert codes == [Status.OK] * (2 * CHANNELS), f"frames after the reset: {codes}"


async def install_keys_with_secrets(tb, iv):
    """A random key on every channel (first IV *iv*) for the reset-scrub scans: returns the
    keys, the host shim's channels and the secrets each key leaves (round keys, H)."""
    keys, chans = [], {}
    for ch in range(CHANNELS):
        keys.append(random.randbytes(32))
        await tb.install(ch, keys[ch], iv)
        chans[ch] = HostChannel(keys[ch], ch, iv)
    return keys, chans, [s for k in keys for s in gcm_key_secrets(k)]


# ================================================================== attestation (gpu_cc)
SIG_BYTES = 96                      # ECDSA P-384 signature, r ‖ s
MODE_NAMES = {Mode.OFF.value: "off", Mode.ON.value: "on", Mode.DEVTOOLS.value: "devtools"}


async def measured_boot(tb, firmware):
    """The extends of *firmware*'s measured boot (``sw.attest.firmware``) go into the RTS
    through ``gpu_cc``'s firmware port, each RTM as its own initiator (``fw_id`` = its owner
    id); the CC-mode policy RTM first reads the active mode through the firmware port
    (``CC_MODE.active``), so CC on / devtools shows in the report. Returns the mode name
    measured."""
    mode = MODE_NAMES[await tb.fw.read(REG["CC_MODE"]) & 3]
    for slot, owner, value in firmware.extends(mode):
        assert not await tb.rts_extend(slot, value, owner), f"extend of slot {slot} by RTM {owner} refused"
    return mode


def recording_rng():
    """``(rng, nonces)``: a random source for ``sw.spdm``'s ``Requester`` that keeps every
    32-byte draw in *nonces* (the nonces it sends; GET_MEASUREMENTS's is the last in H100's
    order), so the verifier checks the report against the nonce the CVM chose."""
    nonces = []

    def rng(n):
        b = random.randbytes(n)
        if n == 32:
            nonces.append(b)
        return b
    return rng, nonces


async def install_session_keys(tb, keys):
    """The firmware installs an SPDM session's keys with the writes of
    ``sw.spdm.dma.session_key_writes`` (request direction on channel 0, response on 1)."""
    from sw.spdm.dma import session_key_writes

    for addr, value in session_key_writes(keys, in_channel=0, out_channel=1):
        await tb.fw.write(addr, value)
        if addr == DMA_KEY_CTRL:
            for _ in range(10_000):
                if not (await tb.key_status())["busy"]:
                    break
            else:
                raise AssertionError("the session key install never completed")
            ch = value & 0xFF
            tb.model.install_key(ch, (keys.request if ch == 0 else keys.response).key, 0)
