"""Testbench plumbing of ``cc_dma``: a device memory (Python dict) behind the ``rd_req`` /
``rd_resp`` / ``wr`` streams with random latency, idle cycles and back-pressure on every
stream; descriptors and keys in; statuses checked in order against
:class:`sw.cc.model.CCDmaModel`, which runs on its own copy of the memory (compared at the
end of every batch)."""
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.cc.layout import (
    desc_layout,
    dma_key_layout,
    rd_req_layout,
    rd_resp_layout,
    status_layout,
    wr_layout,
)
from sw.cc.model import CCDmaModel
from tb.common.payload import pack, unpack
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, random_pause
from tb.common.tb import TB

PARAMS = params()
CHANNELS = PARAMS.get("channels", 4)
FRAME_BLOCKS = PARAMS.get("frame_blocks", 64)
ADDR_BITS = PARAMS.get("addr_bits", 32)
DESC, STATUS, KEY = desc_layout(ADDR_BITS), status_layout, dma_key_layout
RD_REQ, RD_RESP, WR = rd_req_layout(ADDR_BITS), rd_resp_layout, wr_layout(ADDR_BITS)
PROT = (0x1000, 0x9000)          # protected memory, block addresses [base, limit)
BOUNCE = (0x20000, 0x30000)      # bounce buffer


class DmaTB(TB):
    """The regions are class attributes (``PROT``/``BOUNCE``) so that a top embedding
    ``cc_dma`` (``gpu_cc``, tb/cc/gpu_tb.py) reuses this plumbing with its own; a top
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
