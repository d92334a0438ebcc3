"""The CCU firmware model's port (:class:`sw.ccu.sxp_port.CcuPort`) on the RTL.

:class:`sw.ccu.cce.Cce` is synchronous Python; the RTL moves only while cocotb runs. The
CCU's calls therefore run in a cocotb *bridge* thread (:func:`cocotb.task.bridge`), and
each port operation that touches the RTL is a coroutine the thread waits for
(:func:`cocotb.task.resume`): a CSR write or read on the SXP's ``ccu`` port takes the
clock cycles it takes, in simulated time, while the CCU code waits as firmware does.

:class:`RtlCcuPort` is :class:`sw.itx.csr.CsrKeyPort` (the register encoding, written
once) over three bridged bus operations — write, read, wait for STATUS.key_busy = 0 —
plus the tile hold, which here is the testbench's (:meth:`tb.system.env.SystemTB.hold`:
every tile halts and issues nothing more until the next reset), as the ICU's hold pin
would be in a device.

Use: ``await run_ccu(lambda: cce.create_tee(...))`` runs one piece of CCU code to its end.
"""
from cocotb.task import bridge, resume

from sw.itx.csr import CsrKeyPort

__all__ = ["RtlCcuPort", "run_ccu"]


class RtlCcuPort(CsrKeyPort):
    """The CCU port of a :class:`tb.system.env.SystemTB`; call it only from code run by
    :func:`run_ccu`. ``installed`` keeps every non-zero key the CCU installed (the
    checkpoint key is derived inside the CCU: a test learns it only here), so that a scan
    can look for all of them afterwards."""

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
