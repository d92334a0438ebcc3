"""Testbench plumbing of ``cc_ctrl``: the CSR buses (:class:`tb.common.csr.CsrBus`), the
flr/mode_nv pins, the memory streams, and a per-cycle scoreboard against
:class:`sw.cc.model.CCCtrlModel`.

Every cycle the monitor (in the ReadOnly phase) first compares the block's outputs
(``mode``, ``mode_store``, ``ready``, ``fault``, ``key``, read data of last cycle's reads,
memory responses) with the model, then feeds the model what the ports carry in this cycle.
"""
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.cc.layout import Mode, mem_req_layout, mem_resp_layout
from hw.cc.regs import register_map
from sw.cc.model import Bus, CCCtrlModel
from tb.common.csr import CsrBus
from tb.common.payload import pack, unpack
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, random_pause
from tb.common.tb import TB

PARAMS = params()
DEPTH = PARAMS.get("depth", 256)
PROTECTED = PARAMS.get("protected", DEPTH * 3 // 4)
ADDR_BITS = (DEPTH - 1).bit_length()
REQ, RESP = mem_req_layout(ADDR_BITS), mem_resp_layout
REG = {r.name: r.addr for r in register_map()}


class CtrlTB(TB):
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
        self.model = CCCtrlModel(DEPTH, PROTECTED)
        self.expect_resp = deque()
        self.responses = []            # (request, RTL response dict) in order
        self.req_log = deque()
        self.pending_reads = []        # (port, addr, model value) checked next cycle
        self.errors = []
        self.cycle = 0
        self.eeprom = Mode.OFF         # the board's EEPROM bit
        cocotb.start_soon(self._flr_driver())
        cocotb.start_soon(self._monitor())

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

    # ------------------------------------------------------------------ scoreboard
    @staticmethod
    def _bus(port):
        """What *port* carries this cycle (the pins, sampled in ReadOnly)."""
        r_stb, w_stb = int(port.r_stb.value), int(port.w_stb.value)
        if not (r_stb or w_stb):
            return Bus()
        return Bus(r_stb, w_stb, int(port.addr.value), int(port.w_data.value))

    async def _monitor(self):
        dut, m = self.dut, self.model
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.cycle += 1
            for port, addr, want in self.pending_reads:
                got = int(port.r_data.value)
                if got != want:
                    self.errors.append(f"cycle {self.cycle}: {port.name} read {addr:#04x} = "
                                       f"{got:#x}, model {want:#x}")
            self.pending_reads = []
            if int(dut.rst.value):
                m.power_on(int(dut.mode_nv.value))
                self.expect_resp.clear()
                continue
            outs = {"mode": (int(dut.mode.value), m.active.value),
                    "mode_store": (int(dut.mode_store.value), m.store.value),
                    "ready": (int(dut.ready.value), int(m.ready)),
                    "fault": (int(dut.fault.value), m.fault),
                    "key": (int(dut.key.value), m.key)}
            for name, (got, want) in outs.items():
                if got != want:
                    self.errors.append(f"cycle {self.cycle}: {name} = {got:#x}, model {want:#x}")
            flr = int(dut.flr.value)
            hbus, fbus = self._bus(self.host), self._bus(self.fw)
            req = None
            if int(dut.mem_req__valid.value) and int(dut.mem_req__ready.value):
                p = unpack(REQ, dut.mem_req__payload.value)
                req = (p["src"].value if hasattr(p["src"], "value") else p["src"], p["addr"],
                       p["write"], p["data"])
            resp_take = bool(int(dut.mem_resp__valid.value) and int(dut.mem_resp__ready.value))
            if resp_take:
                got = unpack(RESP, dut.mem_resp__payload.value)
                if not self.expect_resp:
                    self.errors.append(f"cycle {self.cycle}: response with none expected")
                else:
                    request, want = self.expect_resp.popleft()
                    if (got["data"], got["ok"]) != want:
                        self.errors.append(f"cycle {self.cycle}: response to {request} = "
                                           f"({got['data']:#x}, {got['ok']}), model {want}")
                    self.responses.append((request, got))
            try:
                out = m.step(flr, hbus, fbus, req, resp_take)
            except AssertionError as e:
                self.errors.append(f"cycle {self.cycle}: {e}")
                continue
            if req is not None:
                self.req_log.popleft()
                self.expect_resp.append((req, out["resp"]))
            if flr and self.expect_resp:
                self.expect_resp.clear()       # an flr drops the response in flight
            for port, bus, key in ((self.host, hbus, "host"), (self.fw, fbus, "fw")):
                if bus.r_stb:
                    self.pending_reads.append((port, bus.addr, out[key]))
            if int(dut.mode_store.value) != self.eeprom.value:
                self.eeprom = Mode(int(dut.mode_store.value))   # the board writes it back
