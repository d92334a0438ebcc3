"""The base of every testbench: owns the clock and reset of ``dut``."""
import logging

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

__all__ = ["TB", "CLOCK_PERIOD_NS"]

CLOCK_PERIOD_NS = 10  # keep in step with tb.common.sim.CLOCK_PERIOD_NS


class TB:
    def __init__(self, dut):
        self.dut = dut
        self.log = logging.getLogger(f"cocotb.tb.{type(self).__name__}")
        self.log.setLevel(logging.INFO)
        self.clk = dut.clk
        dut.rst.value = 0
        cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())

    async def reset(self, cycles=2):
        """Synchronous active-high reset for *cycles* clock cycles."""
        await RisingEdge(self.clk)
        self.dut.rst.value = 1
        await ClockCycles(self.clk, cycles)
        self.dut.rst.value = 0
        await RisingEdge(self.clk)

    async def cycles(self, n):
        await ClockCycles(self.clk, n)

    async def wait_ready(self, timeout=200_000):
        """Until the DUT's ``ready`` output is high with ``rst`` low (sampled in
        ``ReadOnly``), then the next edge: the end of a reset scrub."""
        for _ in range(timeout):
            await RisingEdge(self.clk)
            await ReadOnly()
            if int(self.dut.ready.value) and not int(self.dut.rst.value):
                await RisingEdge(self.clk)
                return
        raise AssertionError(f"ready never rose within {timeout} cycles after the reset")

    async def until_high(self, signal, timeout=1_000_000):
        """Wait until *signal* is high (sampled in ``ReadOnly``), then for the next edge:
        e.g. an input's ``ready`` after a reset scrub."""
        for _ in range(timeout):
            await ReadOnly()
            if int(signal.value):
                await RisingEdge(self.clk)
                return
            await RisingEdge(self.clk)
        raise AssertionError(f"{signal._path} not high within {timeout} cycles")
