"""Benchmark of ``rts`` (the measurement store): cycles of the reset scrub, extend latency
(the cycle the request is taken → the cycle its response is taken), latency of a refused
extend and of a read, and cycles per extend with extends offered back to back. Measured
at the ports by a monitor that logs every handshake cycle by cycle, not taken from the
RTL's constants. Run by ``make bench``."""
import hashlib
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from tb.common.bench import record
from tb.rts.env import RtsTB

EXTENDS = 16
PORTS = ("extend", "resp", "rd", "rd_resp")


class Handshakes:
    """The cycle numbers of every transfer on each port, and of ``ready`` rising."""

    def __init__(self, dut, clk):
        self.dut, self.clk, self.cycle = dut, clk, 0
        self.log = {p: [] for p in PORTS}
        self.ready_at = None
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.cycle += 1
            for p in PORTS:
                if int(getattr(self.dut, f"{p}__valid").value) and int(getattr(self.dut, f"{p}__ready").value):
                    self.log[p].append(self.cycle)
            if self.ready_at is None and int(self.dut.ready.value):
                self.ready_at = self.cycle


@cocotb.test()
async def extends(dut):
    """The scrub after reset, then one extend, one refused extend and one read alone."""
    tb = RtsTB(dut)
    hs = Handshakes(dut, tb.clk)
    await tb.reset()
    start = hs.cycle
    await tb.wait_ready()
    value = random.randbytes(48)
    tb.extend(3, 1, value)
    await tb.check_responses("single extend")
    tb.extend(3, 2, value)                  # another owner: refused
    await tb.check_responses("refused extend")
    got = await tb.read(3)
    assert got.value == hashlib.sha384(bytes(48) + value).digest(), "the read value is not the extend's"
    (e1, e2), (r1, r2) = hs.log["extend"], hs.log["resp"]
    record(scrub_cycles=hs.ready_at - start, extend_latency_cycles=r1 - e1,
           refused_latency_cycles=r2 - e2, read_latency_cycles=hs.log["rd_resp"][0] - hs.log["rd"][0])


@cocotb.test()
async def extend_rate(dut):
    """Cycles per extend with EXTENDS extends offered back to back, responses always taken."""
    tb = RtsTB(dut)
    hs = Handshakes(dut, tb.clk)
    await tb.reset()
    await tb.wait_ready()
    for k in range(EXTENDS):
        tb.extend(k % tb.slots, 1, random.randbytes(48))
    await tb.check_responses("back to back")
    taken = hs.log["extend"]
    assert len(taken) == EXTENDS
    record(extends=EXTENDS, cycles_per_extend=round((taken[-1] - taken[0]) / (EXTENDS - 1), 2))


def bench():
    from tb.common.bench import run_bench

    return {"rts": run_bench("rts", "tb.rts.bench_rts", "extends,extend_rate")}
