"""The ``bcu`` test environment shared by the regression and the benchmark.

:class:`BcuTB` drives the request stream, takes responses (with optional back-pressure),
plays GPU memory for RBT fetches (in order, random latency, back-pressure on both memory
streams), and scoreboards every response against the golden model
(:class:`sw.gpushield.model.BCUModel`): tag, ok and cause of every answer, the address of
every RBT fetch, the ``exc`` pulses, and on :meth:`BcuTB.check_state` the violation log and
the hit/miss counters. Expected values always come from the model.

Kernel slots: every request names a slot (``req_slot``, driven with its payload by the
request source); :meth:`BcuTB.launch` programs and launches the slot of a
:class:`~sw.gpushield.driver.Launch`, :meth:`BcuTB.retire` retires a slot, and
:meth:`BcuTB.check_state` compares every slot's log. :meth:`BcuTB.driver` gives each
*context* its own address range and RBTs, so contexts can run kernels at once.
"""
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gpushield.layout import MAX_SLOTS, RBT_BYTES, Cause, mem_req_layout, resp_layout
from sw.gpushield.driver import Driver, SparseMemory
from sw.gpushield.model import BCUModel, unpack_fields
from sw.gpushield.traces import kernel, to_request
from tb.common.sim import params
from tb.common.stream import Line, StreamSink, StreamSource, never, random_pause
from tb.common.tb import TB

from .cover import BcuCoverage

__all__ = ["BcuTB", "LANES", "SLOTS", "slot_port"]

LANES = params().get("lanes", 32)
SLOTS = params().get("slots", MAX_SLOTS)
CONTEXT_VA = 1 << 40        # each driver context's buffers start this far apart


def slot_port(name, slot):
    """The top-level port name of *name* (rbt_base, kernel_id, id_key, launch, retire,
    log_first, log_count) for kernel slot *slot*: the contract's name for slot 0."""
    return name if slot == 0 else f"{name}_{slot}"


class _RequestSource(StreamSource):
    """The ``req`` stream with ``req_slot`` driven beside each payload (held with it)."""

    def __init__(self, dut, clk):
        self._slot = Line(dut.req_slot)
        super().__init__(dut, "req", clk)

    def send(self, payload, slot=0):
        self.queue.append((int(payload), slot))

    def clear(self):
        super().clear()
        self._slot.set(0)

    def _drive(self, item):
        self._payload.set(item[0])
        self._slot.set(item[1])


class BcuTB(TB):
    def __init__(self, dut, mem_latency=(1, 1)):
        super().__init__(dut)
        self.lanes = LANES
        self.slots = SLOTS
        self.req = _RequestSource(dut, self.clk)
        self.resp = StreamSink(dut, "resp", self.clk)
        self.mem_req = StreamSink(dut, "mem_req", self.clk)
        self.mem_resp = StreamSource(dut, "mem_resp", self.clk)
        dut.precise.value = 0
        for s in range(self.slots):
            for name in ("rbt_base", "kernel_id", "id_key", "launch", "retire"):
                getattr(dut, slot_port(name, s)).value = 0
        self.mem = SparseMemory()
        self.model = BCUModel(self.mem.read128, self.lanes, self.slots)
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
        self.cover = BcuCoverage()         # functional cover points (tb/gpushield/cover.py)
        cocotb.start_soon(self._clock())
        cocotb.start_soon(self._monitor())
        cocotb.start_soon(self._memory())

    # ------------------------------------------------------------------ helpers
    def driver(self, seed=None, context=0):
        """A fresh driver shim over the shared GPU memory. Drivers of different *context*
        numbers place their buffers and RBTs in disjoint ranges (their kernels can run at
        once); drivers of one context number share them (one kernel after another)."""
        return Driver(random.Random(random.getrandbits(32) if seed is None else seed), self.mem,
                      rbt_base=0x7000_0000_0000 + context * self.slots * RBT_BYTES, lanes=self.lanes,
                      slots=self.slots, va_start=Driver.VA_START + context * CONTEXT_VA)

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
    def submit(self, request, slot=0):
        """Queue *request* on kernel slot *slot* (its tag is assigned here) and its expected
        answer."""
        request.tag = self.next_tag
        self.next_tag = (self.next_tag + 1) & 0xFFFF
        result = self.model.check(request, slot)
        self.expected.append((request, result, slot))
        self.fetches.extend(result.fetches)
        self.req.send(request.pack(self.lanes), slot)
        return result

    def submit_ops(self, ops, launch):
        """The ops of a kernel trace, on the slot of *launch*."""
        return [self.submit(to_request(op, launch, lanes=self.lanes), launch.slot) for op in ops]

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

    async def launch(self, launch, precise=None, drain=True):
        """Program a launch's configuration into its slot's ports and pulse the slot's
        ``launch``. With *drain* (the default) the unit is idle first; without, the other
        slots' requests keep flowing (the caller keeps the launched slot's own requests
        and anything its launch could change out of the queue)."""
        if drain:
            await self.drain()
        dut, s = self.dut, launch.slot
        await RisingEdge(self.clk)
        getattr(dut, slot_port("rbt_base", s)).value = launch.rbt_base
        getattr(dut, slot_port("kernel_id", s)).value = launch.kernel_id
        getattr(dut, slot_port("id_key", s)).value = launch.id_key
        if precise is not None:
            dut.precise.value = int(precise)
            self.model.precise = bool(precise)
        getattr(dut, slot_port("launch", s)).value = 1
        await RisingEdge(self.clk)
        getattr(dut, slot_port("launch", s)).value = 0
        st = self.model.slots[s]
        st.rbt_base, st.kernel_id, st.id_key = launch.rbt_base, launch.kernel_id, launch.id_key
        self.model.launch(s)

    async def retire(self, slot, drain=True):
        """Pulse *slot*'s ``retire`` (after draining the unit unless *drain* is false)."""
        if drain:
            await self.drain()
        port = getattr(self.dut, slot_port("retire", slot))
        await RisingEdge(self.clk)
        port.value = 1
        await RisingEdge(self.clk)
        port.value = 0
        self.model.retire(slot)

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
                request, want, slot = self.expected.popleft()
                self.results.append((request, want, self.cycle))
                self.cover.answer(request, want, slot, self.model.precise)
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
        names = ("l1_hits", "l2_hits", "misses") + tuple(slot_port("log_count", s) for s in range(self.slots))
        got = {n: int(getattr(dut, n).value) for n in names}
        want = {"l1_hits": m.l1_hits & 0xFFFFFFFF, "l2_hits": m.l2_hits & 0xFFFFFFFF,
                "misses": m.misses & 0xFFFFFFFF,
                **{slot_port("log_count", s): m.slots[s].log_count for s in range(self.slots)}}
        assert got == want, f"{what}: counters RTL {got}, model {want}"
        for s in range(self.slots):
            if m.slots[s].log_count:
                rtl = int(getattr(dut, slot_port("log_first", s)).value)
                assert rtl == m.log_first_value(s), (
                    f"{what}: slot {s} log_first RTL {rtl:#x}, model {m.log_first_value(s):#x} "
                    f"({m.slots[s].log_first})")
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
