"""cocotb drivers for ``amaranth.lib.stream`` ports (``<port>__valid/ready/payload``).

A transfer happens at a rising edge where ``valid`` and ``ready`` are both high. Both
classes drive their outputs just after a rising edge and sample in the ``ReadOnly`` phase
before the next one, so they see the cycle's settled combinational values (``ready`` of a
pipeline often depends on its output's ``ready`` in the same cycle).

``StreamSource.pause`` and ``StreamSink.pause`` take a generator of booleans (``True`` = idle
this cycle), as in cocotbext-axi's ``set_pause_generator``: the same test sweeps over full
speed, random idle cycles and random back-pressure.

Every port on one clock is stepped by one coroutine, :class:`ClockLoop` (drive after the
edge, sample in ``ReadOnly``), not by a coroutine of its own: a trigger costs cocotb far more
than the Python of a port's step, and a testbench with four ports waited on eight triggers a
cycle. A port writes a line only when its value changes.
"""
import itertools
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["StreamSource", "StreamSink", "TransferLog", "ClockLoop", "Line", "random_pause", "never",
           "interleave"]


def never():
    return itertools.repeat(False)


def random_pause(probability, rng=random):
    """Idle/stall with the given probability each cycle."""
    while True:
        yield rng.random() < probability


class ClockLoop:
    """The coroutine that steps every port of one clock, each cycle: ``drive()`` of every
    port just after the rising edge, ``sample()`` of every port in the ``ReadOnly`` phase,
    in the order the ports were added. One loop per clock and test: a test's coroutines end
    with it, and the next test's first port starts a new loop."""

    _loops = {}

    @classmethod
    def of(cls, clk):
        loop = cls._loops.get(clk)
        if loop is None or loop._task.done():
            loop = cls._loops[clk] = cls(clk)
        return loop

    def __init__(self, clk):
        self.ports = []
        self._task = cocotb.start_soon(self._run(clk))

    async def _run(self, clk):
        edge, settled = RisingEdge(clk), ReadOnly()
        while True:
            await edge
            for port in self.ports:
                port.drive()
            await settled
            for port in self.ports:
                port.sample()


class Line:
    """A DUT signal written only when its value changes (a write is a simulator call)."""

    def __init__(self, handle, value=0):
        self.handle, self.value = handle, value
        handle.value = value

    def set(self, value):
        if value != self.value:
            self.handle.value = self.value = value


class _Port:
    def __init__(self, dut, name, clk):
        self.clk = clk
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.name = name
        self._pause = never()
        self.enabled = True

    def set_pause(self, generator):
        self._pause = generator if generator is not None else never()

    def _start(self):
        ClockLoop.of(self.clk).ports.append(self)


class StreamSource(_Port):
    """Sends payload integers from a queue."""

    def __init__(self, dut, name, clk):
        super().__init__(dut, name, clk)
        self.queue = deque()
        self.sent = 0
        self._current = None
        self._valid, self._payload = Line(self.valid), Line(self.payload)
        self._start()

    def send(self, payload):
        self.queue.append(int(payload))

    def clear(self):
        """Forget queued payloads (e.g. across a reset), drop valid and zero the payload
        lines so no test secret lingers on the port."""
        self.queue.clear()
        self._current = None
        self._valid.set(0)
        self._payload.set(0)

    def empty(self):
        """Nothing queued or waiting for ``ready`` (the queue holds the current payload
        until it is taken)."""
        return not self.queue

    async def wait_idle(self):
        while self.queue:
            await RisingEdge(self.clk)

    def drive(self):
        if self._current is None and self.queue and not next(self._pause):
            self._current = self.queue[0]
        if self._current is not None:
            self._valid.set(1)
            self._drive(self._current)
        else:
            self._valid.set(0)

    def sample(self):
        if self._current is not None and int(self.ready.value):
            self.queue.popleft()
            self.sent += 1
            self._current = None

    def _drive(self, item):
        """Put the queued *item* on the lines (a subclass drives its side-band signals here)."""
        self._payload.set(item)


class StreamSink(_Port):
    """Collects payload integers; ``ready`` follows the pause generator."""

    def __init__(self, dut, name, clk):
        super().__init__(dut, name, clk)
        self.queue = deque()
        self.received = 0
        self._ready = Line(self.ready)
        self._taking = False
        self._start()

    def clear(self):
        self.queue.clear()

    async def recv(self, timeout_cycles=10_000):
        """The next payload; fails the test if none arrives within *timeout_cycles*."""
        for _ in range(timeout_cycles):
            if self.queue:
                return self.queue.popleft()
            await RisingEdge(self.clk)
        if self.queue:
            return self.queue.popleft()
        raise AssertionError(f"{self.name}: no transfer within {timeout_cycles} cycles")

    def drive(self):
        self._taking = self.enabled and not next(self._pause)
        self._ready.set(int(self._taking))

    def sample(self):
        if self._taking and int(self.valid.value):
            self.queue.append(int(self.payload.value))
            self.received += 1


class TransferLog:
    """The cycles of every transfer on the stream ports *names* (``{name: [cycle, …]}`` in
    ``cycles``), counted from the edge after it is created; for latency checks. Create it,
    ``await`` an edge before offering anything (so its first sample is in the cycle of the
    first transfer), and :meth:`stop` it when done."""

    def __init__(self, dut, clk, *names):
        self.cycles = {name: [] for name in names}
        self._ports = [(getattr(dut, f"{n}__valid"), getattr(dut, f"{n}__ready"), self.cycles[n])
                       for n in names]
        self._task = cocotb.start_soon(self._run(clk))

    async def _run(self, clk):
        cycle = 0
        while True:
            await RisingEdge(clk)
            await ReadOnly()
            cycle += 1
            for valid, ready, log in self._ports:
                if int(valid.value) and int(ready.value):
                    log.append(cycle)

    def stop(self):
        self._task.cancel()


def interleave(lists, rng=random):
    """Merge item lists into one list at random, keeping each list's own order (frames of
    several contexts interleaved item by item). *rng*: a ``random.Random`` or the module."""
    queues = [deque(x) for x in lists if x]
    out = []
    while queues:
        q = rng.choice(queues)
        out.append(q.popleft())
        if not q:
            queues.remove(q)
    return out
