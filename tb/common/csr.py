"""cocotb initiator of a CSR bus (:class:`hw.csr.Signature`: ``<prefix>__addr``,
``__w_stb``, ``__w_data``, ``__r_stb``, ``__r_data``).

A write takes effect at the rising edge where ``w_stb`` is high; a read is sampled at the
rising edge where ``r_stb`` is high and ``r_data`` holds its value from then until the next
read. :class:`CsrBus` plays operations in the order they were made, at most one per cycle,
each driven just after a rising edge (or at once, when the bus is idle) for one cycle:

- ``await bus.write(addr, value)`` returns just after the edge that follows the one that took
  the write (the DUT's outputs show its effect then);
- ``await bus.read(addr)`` returns the value just after the edge that follows the one that
  took the read;
- ``bus.submit(write, addr, data)`` queues an operation without waiting (a :class:`CsrOp`,
  ``await bus.wait(op)`` for it), for traffic generators; a monitor that checks the bus
  against a model watches the pins, which carry the operation of the cycle, in ``ReadOnly``.

``set_pause`` takes a generator of booleans (``True``: no operation this cycle), as the
stream drivers of :mod:`tb.common.stream` do. Between operations the strobes and ``w_data``
are low: no key word lingers on the bus.
"""
from collections import deque

import cocotb
from cocotb.triggers import Event, ReadOnly, RisingEdge, current_gpi_trigger

from .stream import never

__all__ = ["CsrOp", "CsrBus"]


class CsrOp:
    """One bus operation; ``done`` once it completed, ``result`` the value of a read."""

    def __init__(self, write, addr, data=0):
        self.write, self.addr, self.data = bool(write), addr, data
        self.result = None
        self.done = False
        self._event = Event()

    def _finish(self, result=None):
        self.result, self.done = result, True
        self._event.set()

    def __repr__(self):
        kind = f"write {self.data:#x} to" if self.write else "read of"
        return f"CsrOp({kind} {self.addr:#x})"


class CsrBus:
    """The initiator side of the CSR bus ``<prefix>__*`` of *dut*, clocked by *clk*."""

    def __init__(self, dut, prefix, clk):
        self.name, self.clk = prefix, clk
        self.addr = getattr(dut, f"{prefix}__addr")
        self.w_stb = getattr(dut, f"{prefix}__w_stb")
        self.w_data = getattr(dut, f"{prefix}__w_data")
        self.r_stb = getattr(dut, f"{prefix}__r_stb")
        self.r_data = getattr(dut, f"{prefix}__r_data")
        for s in (self.addr, self.w_stb, self.w_data, self.r_stb):
            s.value = 0
        self.queue = deque()        # operations not yet driven
        self.current = None         # the operation on the pins this cycle
        self.pause = never()
        self._player = None

    def set_pause(self, generator):
        self.pause = generator

    # ------------------------------------------------------------------ operations
    def submit(self, write, addr, data=0):
        """Queue an operation; returns its :class:`CsrOp` at once."""
        op = CsrOp(write, addr, data)
        self.queue.append(op)
        if self._player is None:
            self._player = cocotb.start_soon(self._play())
        return op

    async def wait(self, op):
        """Until *op* completed; returns its result (the value, for a read)."""
        await op._event.wait()
        return op.result

    async def write(self, addr, value):
        await self.wait(self.submit(True, addr, value))

    async def read(self, addr):
        return await self.wait(self.submit(False, addr))

    # ------------------------------------------------------------------ pins
    def _drive(self, op):
        if op is None:
            self.w_stb.value = self.r_stb.value = 0
            self.w_data.value = 0
            return
        self.addr.value = op.addr
        self.w_data.value = op.data if op.write else 0
        self.w_stb.value = int(op.write)
        self.r_stb.value = int(not op.write)

    async def _play(self):
        # pins cannot change in ReadOnly: an operation queued from there starts next cycle
        if isinstance(current_gpi_trigger(), ReadOnly):
            await RisingEdge(self.clk)
        taken = value = None        # the operation the last edge took, and its read data
        while self.queue or taken is not None:
            op = self.queue.popleft() if self.queue and not next(self.pause) else None
            self.current = op
            self._drive(op)
            if taken is not None and not taken.write:
                await ReadOnly()
                value = int(self.r_data.value)
            await RisingEdge(self.clk)
            self.current = None
            if taken is not None:
                # one edge after the one that took it: the DUT's outputs show a write here
                taken._finish(None if taken.write else value)
            taken = op
        self._drive(None)
        self._player = None
