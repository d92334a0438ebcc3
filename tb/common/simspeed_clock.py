"""The cocotb floor of simulation speed (tb/common/simspeed.py): a cocotb test that starts
the testbenches' clock (:class:`tb.common.tb.TB`), resets the design and then only waits
``SIMSPEED_CYCLES`` cycles, no driver, monitor or model. Not a test of the design (not
``test_*``: pytest does not collect it); run by :func:`tb.common.simspeed.cocotb_clock_only`."""
import os

import cocotb
from cocotb.triggers import ClockCycles

from tb.common.tb import TB


@cocotb.test()
async def clock_only(dut):
    """Reset, then the clock only."""
    tb = TB(dut)
    await tb.reset()
    cycles = int(os.environ.get("SIMSPEED_CYCLES", "20000"))
    await ClockCycles(tb.clk, cycles)
    assert cycles > 0
