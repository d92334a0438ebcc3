"""The ``bcu`` test environment shared by the regression and the benchmark.

:class:`BcuTB` drives the request stream, takes responses (with optional back-pressure),
plays GPU memory for RBT fetches (in order, random latency, back-pressure on both memory
streams), and scoreboards every response against the golden model
(:class:`sw.gpushield.model.BCUModel`): tag, ok and cause of every answer, the address of
every RBT fetch, the ``exc`` pulses, and on :meth:`BcuTB.check_state` the violation log and
the hit/miss counters. Expected values always come from the model.
"""
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gpushield.layout import Cause, mem_req_layout, resp_layout
from sw.gpushield.driver import Driver, SparseMemory
from sw.gpushield.model import BCUModel, unpack_fields
from sw.gpushield.traces import kernel, to_request
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, never, random_pause
from tb.common.tb import TB

__all__ = ["BcuTB", "LANES"]

LANES = params().get("lanes", 32)


class BcuTB(TB):
    def __init__(self, dut, mem_latency=(1, 1)):
        super().__init__(dut)
        self.lanes = LANES
        self.req = StreamSource(dut, "req", self.clk)
        self.resp = StreamSink(dut, "resp", self.clk)
        self.mem_req = StreamSink(dut, "mem_req", self.clk)
        self.mem_resp = StreamSource(dut, "mem_resp", self.clk)
        for name in ("rbt_base", "kernel_id", "id_key", "precise", "launch"):
            getattr(dut, name).value = 0
        self.mem = SparseMemory()
        self.model = BCUModel(self.mem.read128, self.lanes)
        self.mem_latency = mem_latency     # (min, max) cycles from mem_req to mem_resp
        self.expected = deque()            # model results, in request order
        self.fetches = deque()             # expected RBT fetch addresses, in order
        self.pending_mem = deque()         # (due cycle, data)
        self.results = []                  # (request, model result, resp cycle)
        self.exc_tags = []
        self.cycle = 0
        self.next_tag = 0
        self.errors = []
        self.present = []                  # cycle each request was first presented
        self.accepted = []                 # cycle each request was accepted
        self.answered = []                 # cycle of each response transfer
        self.mem_turnaround = []           # mem_req transfer -> mem_resp transfer cycles
        self._mem_sent = deque()
        self.in_reset = False
        cocotb.start_soon(self._clock())
        cocotb.start_soon(self._monitor())
        cocotb.start_soon(self._memory())

    # ------------------------------------------------------------------ helpers
    def driver(self, seed=None):
        """A fresh driver shim over the shared GPU memory."""
        return Driver(random.Random(random.getrandbits(32) if seed is None else seed), self.mem,
                      lanes=self.lanes)

    def set_stalls(self, idle=0.0, stall=0.0, mem_stall=0.0, mem_idle=0.0):
        self.req.set_pause(random_pause(idle) if idle else never())
        self.resp.set_pause(random_pause(stall) if stall else never())
        self.mem_req.set_pause(random_pause(mem_stall) if mem_stall else never())
        self.mem_resp.set_pause(random_pause(mem_idle) if mem_idle else never())

    async def _clock(self):
        while True:
            await RisingEdge(self.clk)
            self.cycle += 1

    def fail(self, message):
        self.errors.append(message)
        if len(self.errors) == 1:
            self.log.error(message)

    # ------------------------------------------------------------------ traffic
    def submit(self, request):
        """Queue *request* (its tag is assigned here) and its expected answer."""
        request.tag = self.next_tag
        self.next_tag = (self.next_tag + 1) & 0xFFFF
        result = self.model.check(request)
        self.expected.append((request, result))
        self.fetches.extend(result.fetches)
        self.req.send(request.pack(self.lanes))
        return result

    def submit_ops(self, ops, launch):
        return [self.submit(to_request(op, launch, lanes=self.lanes)) for op in ops]

    async def drain(self, timeout=200_000):
        """Wait until every queued request has been answered and checked."""
        for _ in range(timeout):
            if not self.expected and self.req.empty():
                break
            await RisingEdge(self.clk)
        else:
            raise AssertionError(f"{len(self.expected)} requests unanswered after {timeout} cycles")
        self.raise_errors()

    def raise_errors(self):
        if self.errors:
            raise AssertionError(f"{len(self.errors)} mismatches; first: {self.errors[0]}")

    async def launch(self, launch, precise=None):
        """Program a launch's configuration and pulse ``launch`` (the unit must be idle)."""
        await self.drain()
        dut = self.dut
        await RisingEdge(self.clk)
        dut.rbt_base.value = launch.rbt_base
        dut.kernel_id.value = launch.kernel_id
        dut.id_key.value = launch.id_key
        if precise is not None:
            dut.precise.value = int(precise)
            self.model.precise = bool(precise)
        dut.launch.value = 1
        await RisingEdge(self.clk)
        dut.launch.value = 0
        self.model.rbt_base, self.model.kernel_id, self.model.id_key = (
            launch.rbt_base, launch.kernel_id, launch.id_key)
        self.model.launch()

    async def run_kernel(self, name, seed=None, precise=None, **params):
        """A fresh driver, the kernel's buffers, a launch, all its ops; returns the launch."""
        drv = self.driver(seed)
        k = kernel(name, drv, seed=random.getrandbits(32) if seed is None else seed, **params)
        launch = drv.launch()
        await self.launch(launch, precise)
        self.submit_ops(k.ops(), launch)
        await self.drain()
        return launch

    # ------------------------------------------------------------------ monitors
    async def _monitor(self):
        dut = self.dut
        was_valid = False
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            if self.in_reset:
                was_valid = False
                continue
            req_v, req_r = int(dut.req__valid.value), int(dut.req__ready.value)
            if req_v and not was_valid:
                self.present.append(self.cycle)
            if req_v and req_r:
                self.accepted.append(self.cycle)
            was_valid = bool(req_v and not req_r)
            exc = int(dut.exc.value)
            if int(dut.resp__valid.value) and int(dut.resp__ready.value):
                got = unpack_fields(resp_layout, int(dut.resp__payload.value))
                self.answered.append(self.cycle)
                if not self.expected:
                    self.fail(f"cycle {self.cycle}: unexpected response {got}")
                    continue
                request, want = self.expected.popleft()
                self.results.append((request, want, self.cycle))
                if (got["tag"], got["ok"], got["cause"]) != (want.tag, int(want.ok), want.cause.value):
                    self.fail(f"tag {want.tag}: RTL ok={got['ok']} cause={Cause(got['cause']).name} "
                              f"tag={got['tag']}, model ok={int(want.ok)} cause={want.cause.name}")
                if exc != int(self.model.precise and not want.ok):
                    self.fail(f"tag {want.tag}: exc={exc} with ok={int(want.ok)}, precise={self.model.precise}")
                if exc:
                    self.exc_tags.append(got["tag"])
            elif exc:
                self.fail(f"cycle {self.cycle}: exc without a response transfer")

    async def _memory(self):
        # GPU memory: watches mem_req transfers itself (the sink only drives ready) and
        # answers in order after a random latency through the mem_resp source.
        dut = self.dut
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.mem_req.queue.clear()
            if self.in_reset:
                continue
            if int(dut.mem_resp__valid.value) and int(dut.mem_resp__ready.value) and self._mem_sent:
                self.mem_turnaround.append(self.cycle - self._mem_sent.popleft())
            if int(dut.mem_req__valid.value) and int(dut.mem_req__ready.value):
                addr = unpack_fields(mem_req_layout, int(dut.mem_req__payload.value))["addr"]
                if not self.fetches:
                    self.fail(f"cycle {self.cycle}: unexpected RBT fetch at {addr:#x}")
                else:
                    want = self.fetches.popleft()
                    if addr != want:
                        self.fail(f"cycle {self.cycle}: RBT fetch at {addr:#x}, model expects {want:#x}")
                self._mem_sent.append(self.cycle)
                self.pending_mem.append((self.cycle + random.randint(*self.mem_latency),
                                         self.mem.read128(addr)))
            while self.pending_mem and self.pending_mem[0][0] <= self.cycle:
                self.mem_resp.send(self.pending_mem.popleft()[1])

    # ------------------------------------------------------------------ state checks
    async def check_state(self, what=""):
        """Log and counters of the RTL against the model (the unit must be drained)."""
        await self.drain()
        await ReadOnly()
        dut, m = self.dut, self.model
        got = {n: int(getattr(dut, n).value) for n in ("l1_hits", "l2_hits", "misses", "log_count")}
        want = {"l1_hits": m.l1_hits & 0xFFFFFFFF, "l2_hits": m.l2_hits & 0xFFFFFFFF,
                "misses": m.misses & 0xFFFFFFFF, "log_count": m.log_count}
        assert got == want, f"{what}: counters RTL {got}, model {want}"
        if m.log_count:
            assert int(dut.log_first.value) == m.log_first_value(), (
                f"{what}: log_first RTL {int(dut.log_first.value):#x}, model {m.log_first_value():#x} "
                f"({m.log_first})")
        assert self.exc_tags == m.exc_tags, f"{what}: exc tags RTL {self.exc_tags[:8]}, model {m.exc_tags[:8]}"
        await RisingEdge(self.clk)

    async def reset(self, cycles=2):
        """Reset, then wait until ``req`` is ready: after reset the BCU refuses requests
        while it zeroes its L2 RCache entries (``BCU.scrub_cycles``)."""
        await super().reset(cycles)
        await self.until_high(self.dut.req__ready)

    async def do_reset(self):
        """Reset the unit and everything in flight around it (memory included)."""
        self.in_reset = True
        self.req.clear()
        self.mem_resp.clear()
        await self.reset()
        self.pending_mem.clear()
        self._mem_sent.clear()
        self.resp.clear()
        self.mem_req.clear()
        self.expected.clear()
        self.fetches.clear()
        self.exc_tags.clear()
        self.model.reset()
        await ReadOnly()
        await RisingEdge(self.clk)
        self.resp.clear()
        self.mem_req.clear()
        self.in_reset = False
