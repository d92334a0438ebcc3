"""The ``pcie_rdtable`` test environment (tb/pcie/test_pcie.py runs the tests).

:class:`PcieTB` is a cycle-level scoreboard: each cycle it steps the golden model
:class:`sw.pcie.RdTableModel` with what the RTL took in that cycle — the request
accepted on ``req_i`` and the completion beat taken from the check register into the checks
(:class:`sw.pcie.CheckRegister` follows it from ``cpl_i``'s handshake and ``ready``) — and
the ``timeout`` input, compares every status output (``err_count``, ``err_tag``,
``err_cause``, ``timeout_count``, ``timeout_tag``, ``outstanding``) with the model's in the
same cycle, and compares every beat leaving on ``req_o``/``cpl_o`` with the model's next
expected beat. Expected values thus come from the model; the RTL supplies only its timing
(when it accepted), and the model raises if that timing breaks a rule (a request accepted
with every tag outstanding).

The host (:class:`Host`) answers each request seen on ``req_o`` with completions from
:mod:`sw.pcie.host` (a uniformly random legal split at the RCB and max payload, junk in
every untrusted header field), interleaved packet by packet across tags in random order
with random latency, and can inject replays, garbage and framing faults.

:data:`P` holds the parameters of the design being simulated (``check_params`` of its build).
"""
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.pcie import PcieReadTable
from hw.pcie.layout import Cause, check_params
from hw.sxp.packet import Kind
from sw.pcie import (
    Beat,
    CheckRegister,
    ModelError,
    RdTableModel,
    completion_packets,
    decode,
    encode,
    header,
    random_split,
)
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, never, random_pause
from tb.common.tb import TB

from .cover import PcieCoverage

__all__ = ["PcieTB", "Host", "PARAMS", "P", "G", "STATUS", "SCRUB", "BAD", "pause", "random_read", "traffic",
           "cpl"]

PARAMS = params()
P = check_params(**PARAMS)
G = P.granule          # bytes of a beat: reads and legal completions are whole beats
STATUS = ("err_count", "err_tag", "err_cause", "timeout_count", "timeout_tag", "outstanding")
SCRUB = PcieReadTable(**PARAMS).scrub_cycles   # req_i refused after reset (the RTL's own)


def pause(p):
    """A pause generator: random with probability *p*, or none."""
    return random_pause(p) if p else never()


class PcieTB(TB):
    """The four ports' drivers and sinks and the per-cycle model scoreboard."""

    def __init__(self, dut):
        super().__init__(dut)
        dut.timeout.value = 0
        self.req_src = StreamSource(dut, "req_i", self.clk)
        self.cpl_src = StreamSource(dut, "cpl_i", self.clk)
        self.req_sink = StreamSink(dut, "req_o", self.clk)
        self.cpl_sink = StreamSink(dut, "cpl_o", self.clk)
        self.model = RdTableModel(**PARAMS)
        self.check_reg = CheckRegister()
        self.failures = []
        self.synced = False
        self.cycle = 0
        self.out_beats = 0            # cpl_o beats checked
        self.full_stalls = 0          # cycles a request waited on a full table
        self.quick_reuse = 0          # tags allocated in the cycle after they were freed
        self._freed_at = {}
        self.cover = PcieCoverage()   # functional cover points (tb/pcie/cover.py)
        self.trace = {}               # port -> cycles it transferred (outputs: was valid)
        self._status = [getattr(dut, name) for name in STATUS]
        self._ports = {port: tuple(getattr(dut, f"{port}__{sig}") for sig in ("valid", "ready", "payload"))
                       for port in ("req_i", "cpl_i", "req_o", "cpl_o")}
        cocotb.start_soon(self._monitor())

    # ---- scoreboard ----------------------------------------------------------------
    def fail(self, msg):
        if len(self.failures) < 10:
            self.failures.append(f"cycle {self.cycle}: {msg}")

    def check(self):
        assert not self.failures, "\n".join(self.failures)

    def _sample(self, port):
        valid, ready, payload = self._ports[port]
        if int(valid.value) and int(ready.value):
            return decode(payload.value, P.lanes)
        return None

    async def _monitor(self):
        d, m = self.dut, self.model
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.cycle += 1
            rst = int(d.rst.value)
            if self.synced:
                got = [int(h.value) for h in self._status]
                want = m.status()
                if got != [want[name] for name in STATUS]:
                    self.fail(f"status {dict(zip(STATUS, got))} != model {want}")
            if rst:
                m.reset()
                self.check_reg.clear()
                self.cover.reset()
                self.synced = True
                continue
            if not self.synced:
                continue
            if self.trace:
                for port, (valid, ready, _) in self._ports.items():
                    if int(valid.value) and (port.endswith("_o") or int(ready.value)):
                        self.trace[port].append(self.cycle)
            for port, queue in (("req_o", m.req_out), ("cpl_o", m.cpl_out)):
                beat = self._sample(port)
                if beat is None:
                    continue
                if port == "cpl_o":
                    self.out_beats += 1
                    self.cover.forwarded(beat)
                if not queue:
                    self.fail(f"{port}: unexpected beat {beat}")
                elif beat != queue[0]:
                    self.fail(f"{port}: {beat}\n  model expects {queue[0]}")
                    queue.popleft()
                else:
                    queue.popleft()
            req = self._sample("req_i")
            cpl = self.check_reg.cycle(self._sample("cpl_i"), int(self._ports["cpl_i"][1].value))
            if req is None and m.outstanding == P.entries and int(self._ports["req_i"][0].value):
                self.full_stalls += 1
            finished, errors = len(m.finished), len(m.errors)
            try:
                tag = m.step(req, cpl, int(d.timeout.value))
            except ModelError as error:
                self.fail(str(error))
                continue
            if tag is not None and self._freed_at.get(tag) == m.cycle - 1:
                self.quick_reuse += 1
            if tag is not None:
                self.cover.allocated(tag, self._freed_at.get(tag) == m.cycle - 1)
            self.cover.errors(m.errors[errors:])
            for _, t in m.finished[finished:]:
                self._freed_at[t] = m.cycle
            for _, t, _ in m.timeouts[-1:]:
                self._freed_at[t] = m.cycle

    # ---- stimulus ------------------------------------------------------------------
    async def reset(self, cycles=2):
        """Reset, then wait until ``req_i`` is ready (the table's rows are zeroed after a
        reset, ``scrub_cycles`` cycles)."""
        await super().reset(cycles)
        await self.until_high(self.dut.req_i__ready)

    async def start(self):
        await self.reset()
        self.check()

    def start_trace(self):
        self.trace = {port: [] for port in ("req_i", "cpl_i", "req_o", "cpl_o")}

    async def reset_now(self, host=None, cycles=2):
        """Reset wherever traffic is (requests outstanding, packets half sent); the host
        forgets every read and sends nothing meanwhile."""
        if host:
            host.clear()
            host.hold = True
        self.req_src.clear()
        self.cpl_src.clear()
        self.req_sink.enabled = self.cpl_sink.enabled = False
        await RisingEdge(self.clk)
        self.dut.rst.value = 1
        for _ in range(cycles):
            await RisingEdge(self.clk)
        self.dut.rst.value = 0
        self.req_src.clear()
        self.cpl_src.clear()
        self.req_sink.clear()
        self.cpl_sink.clear()
        if host:
            host.clear()
            host.hold = False
        self.req_sink.enabled = self.cpl_sink.enabled = True

    def request(self, **fields):
        """Queue a read request; fields the table does not use are random."""
        hdr = header(kind=Kind.READ_REQ, tile=random.randrange(1472), xbctx=random.randrange(16),
                     key_index=random.randrange(16), aes=random.randrange(2), cc=random.randrange(2),
                     tag=random.randrange(256))
        hdr.update(fields)
        self.req_src.send(encode(Beat(random.getrandbits(128 * P.lanes), hdr, 1, 1), P.lanes))

    def send(self, packet):
        for b in packet:
            self.cpl_src.send(encode(b, P.lanes))

    async def settle(self, cycles=10_000, host=None):
        """Wait until every queue is empty and the model expects no more output."""
        m = self.model
        for _ in range(cycles):
            await RisingEdge(self.clk)
            self.check()
            busy = (self.req_src.queue or self.cpl_src.queue or m.req_out or m.cpl_out
                    or self.req_sink.queue or (host and host.busy()))
            if not busy:
                for _ in range(3):
                    await RisingEdge(self.clk)
                self.check()
                return
        raise AssertionError(f"not idle after {cycles} cycles: {len(self.req_src.queue)} requests, "
                             f"{len(self.cpl_src.queue)} cpl beats queued, model expects "
                             f"{len(m.req_out)} req_o / {len(m.cpl_out)} cpl_o beats, "
                             f"{m.outstanding} outstanding")

    async def next_tag(self):
        """The tag of the next request the host sees on req_o."""
        for _ in range(1000):
            if self.req_sink.queue:
                return decode(self.req_sink.queue.popleft(), P.lanes).hdr["tag"]
            await RisingEdge(self.clk)
        raise AssertionError("no request on req_o")


class Host:
    """Answers every request on ``req_o`` with its completions (see the module docstring)."""

    def __init__(self, tb, latency=(0, 30), gap=(0, 8), mode="uniform", faults=0.0, rng=random):
        self.tb, self.rng = tb, rng
        self.latency, self.gap, self.mode, self.faults = latency, gap, mode, faults
        self.pending = {}         # tag -> [cycle it may send, deque of packets]
        self.sent = deque(maxlen=32)
        self.hold = False         # answer nothing (table-full episodes)
        self.injected = 0
        self.task = cocotb.start_soon(self._run())

    def busy(self):
        return bool(self.pending)

    def clear(self):
        self.pending.clear()
        self.sent.clear()

    def _fault(self, pkt):
        """Framing faults on a legal completion: a surplus beat or a missing one."""
        pkt = list(pkt)
        if self.rng.random() < 0.5:
            extra = Beat(self.rng.getrandbits(128 * P.lanes), pkt[-1].hdr, 0, 1)
            pkt[-1] = Beat(pkt[-1].data, pkt[-1].hdr, pkt[-1].first, 0)
            return pkt + [extra]
        if len(pkt) > 1:
            pkt = pkt[:-1]
            pkt[-1] = Beat(pkt[-1].data, pkt[-1].hdr, pkt[-1].first, 1)
        return pkt

    def _garbage(self):
        """A replay of a recent packet, or a completion for a random tag whose address can
        match no read (not 16-byte aligned)."""
        if self.sent and self.rng.random() < 0.5:
            return list(self.rng.choice(self.sent))
        n = self.rng.randint(1, 4)
        hdr = header(tag=self.rng.randrange(256), addr=self.rng.getrandbits(32) | 8,
                     length=self.rng.choice([0, 16, 64, 256, 1024, self.rng.getrandbits(11)]))
        return [Beat(self.rng.getrandbits(128 * P.lanes), dict(hdr), int(k == 0), int(k == n - 1))
                for k in range(n)]

    async def _run(self):
        tb, rng = self.tb, self.rng
        while True:
            await RisingEdge(tb.clk)
            now = tb.cycle
            tb.cpl_sink.queue.clear()          # the scoreboard checked them already
            while tb.req_sink.queue:
                b = decode(tb.req_sink.queue.popleft(), P.lanes)
                tag, addr, length = b.hdr["tag"], b.hdr["addr"], b.hdr["length"]
                split = random_split(addr, length, P.rcb, P.max_payload, rng, self.mode, lanes=P.lanes)
                pkts = completion_packets(tag, addr, rng.randbytes(length), split, P.lanes, rng,
                                          junk=True)
                self.pending[tag] = [now + rng.randint(*self.latency), deque(pkts)]
            if self.hold or len(tb.cpl_src.queue) > 1:
                continue
            if self.faults and rng.random() < self.faults:
                self.injected += 1
                tb.send(self._garbage())
                continue
            ready = [t for t, (at, _) in self.pending.items() if at <= now]
            if not ready:
                continue
            tag = rng.choice(ready)
            entry = self.pending[tag]
            pkt = entry[1].popleft()
            if entry[1]:
                entry[0] = now + rng.randint(*self.gap)
            else:
                del self.pending[tag]
            self.sent.append(pkt)
            if self.faults and rng.random() < self.faults:
                self.injected += 1
                pkt = self._fault(pkt)
            tb.send(pkt)


def random_read(tb, max_len=None):
    """Queue a read of random whole beats (at most *max_len* bytes) at a random beat address."""
    max_len = max_len or P.max_read
    length = G * random.choice([1, 2, 4, random.randint(1, max_len // G), max_len // G])
    tb.request(addr=G * random.randrange((1 << 31) // G), length=min(length, max_len))


async def traffic(tb, host, requests, full_episodes=True):
    """Send *requests* random reads in bursts; in about half the bursts the host stops
    answering until the table has been full (and back-pressuring) for a few cycles."""
    m = tb.model
    sent = 0
    while sent < requests:
        episode = full_episodes and random.random() < 0.5
        burst = P.entries + random.randint(1, P.entries // 2) if episode else \
            random.randint(1, 2 * P.entries)
        burst = min(burst, requests - sent)
        host.hold = episode
        for _ in range(burst):
            random_read(tb)
        sent += burst
        if episode:
            for _ in range(40 * P.entries):
                await RisingEdge(tb.clk)
                if m.outstanding == P.entries and tb.req_src.queue:
                    break
            for _ in range(random.randint(1, 20)):
                await RisingEdge(tb.clk)
            host.hold = False
        while len(tb.req_src.queue) > P.entries // 2:
            await RisingEdge(tb.clk)
            tb.check()
    await tb.settle(host=host, cycles=200_000)


def cpl(tag, addr, length, beats=None, data=None):
    """A completion packet for *tag* (*beats* beats, default *length* in whole beats, at least
    one), junk in the fields the table does not use."""
    n = max(length // (16 * P.lanes) if beats is None else beats, 1)
    return [Beat(random.getrandbits(128 * P.lanes) if data is None else data + k,
                 header(tag=tag, addr=addr, length=length, tile=random.randrange(2048),
                        key_index=random.randrange(16), aes=random.randrange(2),
                        cc=random.randrange(2), kind=random.randrange(4)),
                 int(k == 0), int(k == n - 1)) for k in range(n)]


BAD = {  # name: (tag: the read's / a free one / >= entries, addr offset, length, beats, cause)
    "free_tag": ("free", 0, P.rcb, None, Cause.UNKNOWN_TAG),
    "tag_beyond_entries": ("beyond", 0, P.rcb, None, Cause.UNKNOWN_TAG),
    "overrun": ("read", 0, 528, 33, Cause.OVERRUN),
    "address_ahead": ("read", P.rcb, P.rcb, None, Cause.ADDRESS),
    "address_behind": ("read", -P.rcb, P.rcb, None, Cause.ADDRESS),
    "address_misaligned": ("read", 4, P.rcb, None, Cause.ADDRESS),
    "length_zero": ("read", 0, 0, 1, Cause.MALFORMED),
    "length_not_granule": ("read", 0, 40, 3, Cause.MALFORMED),
    "above_max_payload": ("read", 0, P.max_payload + P.rcb, None, Cause.MALFORMED),
    "off_rcb": ("read", 0, P.rcb - G, None, Cause.BOUNDARY),   # (none when the RCB is a beat)
    "unknown_before_overrun": ("free", 0, 1024, 2, Cause.UNKNOWN_TAG),
    "overrun_before_address": ("read", 16, 1024, 2, Cause.OVERRUN),
    "address_before_malformed": ("read", 8, 0, 1, Cause.ADDRESS),
}


async def _cycles(tb, n):
    """Wait *n* clock edges."""
    for _ in range(n):
        await RisingEdge(tb.clk)


def _consecutive(cycles):
    """Whether *cycles* is a non-empty run of consecutive cycles."""
    return cycles == list(range(cycles[0], cycles[0] + len(cycles))) if cycles else False
