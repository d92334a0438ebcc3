"""cocotb regression of ``pcie_rdtable`` (hw/pcie) against the golden model (sw/pcie).

Every test runs a cycle-level scoreboard (:class:`PcieTB`): each cycle it steps the golden
model :class:`sw.pcie.RdTableModel` with what the RTL took in that cycle — the request
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

The regression runs at ``lanes`` = 1 (16 and 256 entries) and ``lanes`` = 4 (32 entries, the
SXP system's table): beats of 16 · lanes bytes, reads and completions in whole beats.
"""
import random
from collections import deque

import cocotb
import pytest
from cocotb.triggers import ReadOnly, RisingEdge

from hw.pcie import PcieReadTable
from hw.pcie.layout import Cause, check_params, dynamic_layout
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
    timeout_bounds,
)
from tb.common.payload import pack
from tb.common.scrub import Refusals, Scanner, bytes_secret, int_secret
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, never, random_pause
from tb.common.tb import TB

PARAMS = params()
P = check_params(**PARAMS)
G = P.granule          # bytes of a beat: reads and legal completions are whole beats
STATUS = ("err_count", "err_tag", "err_cause", "timeout_count", "timeout_tag", "outstanding")
SCRUB = PcieReadTable(**PARAMS).scrub_cycles   # req_i refused after reset (the RTL's own)


def pause(p):
    return random_pause(p) if p else never()


class PcieTB(TB):
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
            finished = len(m.finished)
            try:
                tag = m.step(req, cpl, int(d.timeout.value))
            except ModelError as error:
                self.fail(str(error))
                continue
            if tag is not None and self._freed_at.get(tag) == m.cycle - 1:
                self.quick_reuse += 1
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


# ---- random traffic -------------------------------------------------------------------
@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.3], stall=[0.0, 0.4])
async def random_traffic(dut, idle, stall):
    """Random reads from many tiles and key contexts, random legal completion splits,
    random interleaving and latency, table-full episodes, idle cycles on both inputs and
    back-pressure on both outputs; junk in every untrusted header field."""
    tb = PcieTB(dut)
    for port in (tb.req_src, tb.cpl_src):
        port.set_pause(pause(idle))
    for port in (tb.req_sink, tb.cpl_sink):
        port.set_pause(pause(stall))
    await tb.start()
    host = Host(tb, latency=(0, 3 * P.entries))
    requests = max(600, 2 * P.entries)
    if not (idle or stall):
        requests += requests // 2
    await traffic(tb, host, requests)
    m = tb.model
    tb.log.info("%d reads, %d cpl_o beats, %d full-table stall cycles, %d tags reused the "
                "cycle after their free", len(m.finished), tb.out_beats, tb.full_stalls,
                tb.quick_reuse)
    assert m.outstanding == 0 and not m.errors and m.timeout_count == 0
    assert len(m.finished) == requests
    assert tb.full_stalls > 0, "the table never filled"
    assert tb.quick_reuse > 0, "no tag was reused right after its free"
    tb.check()


@cocotb.test()
async def random_traffic_with_faults(dut):
    """Random traffic with a hostile host: replays, garbage completions and framing faults
    interleaved with the legal completions; everything checked against the model, and
    every read still completes."""
    tb = PcieTB(dut)
    tb.cpl_src.set_pause(pause(0.1))
    tb.cpl_sink.set_pause(pause(0.2))
    await tb.start()
    host = Host(tb, latency=(0, 60), faults=0.08)
    await traffic(tb, host, 400, full_episodes=False)
    m = tb.model
    tb.log.info("%d faults injected, %d error events, causes %s", host.injected, len(m.errors),
                sorted({c.name for _, _, c in m.errors}))
    assert m.outstanding == 0 and len(m.finished) == 400
    assert len(m.errors) >= host.injected // 2 > 0
    tb.check()


@cocotb.test()
async def reset_outstanding(dut):
    """Three resets, each with reads outstanding and a completion half forwarded: every
    tag is freed, the counters clear, nothing from before comes out, the next request gets
    tag 0 again (the scoreboard checks all of it every cycle); ``req_i`` is refused for
    exactly ``PcieReadTable.scrub_cycles`` cycles after each reset while the table rows are
    zeroed, and then no signal or memory word holds a word of a read's address or of its
    table entry (next address and length left, where a row is 32 bits or wider), every
    table row is zero (before each reset, as a control, the same scan finds both in the
    live table, and rows in use); then random traffic
    with table-full episodes runs correctly to the end."""
    tb = PcieTB(dut)
    tb.cpl_sink.set_pause(pause(0.3))
    refused = Refusals(tb.clk, dut.rst, dut.req_i__ready)
    await tb.start()
    assert await refused.after_reset() == SCRUB, "req_i refused after reset not for scrub_cycles"
    scanner = Scanner(dut, skip=("req_i__", "cpl_i__"))
    await ReadOnly()
    scanner.baseline()
    await RisingEdge(tb.clk)
    # every read sent: its address, and its entry as the table holds it at each step
    secrets, entry = [], dynamic_layout(P)
    request = tb.request

    def recorded(**fields):
        addr, length = fields["addr"], fields["length"]
        secrets.append(bytes_secret("address", f"{addr:#x}", addr.to_bytes(4, "little")))
        first, units = addr // G, length // G
        for done in range(units):
            row = pack(entry, next=first + done, left=units - done)
            secrets.append(int_secret("entry", f"{addr:#x}+{done}", row, (entry.size + 7) // 8))
        request(**fields)

    tb.request = recorded
    m = tb.model
    host = Host(tb, latency=(5, 80))
    for _ in range(3):
        hit = False
        while not hit:      # reads queued, then reset at a random point where >= 2 are
            for _ in range(random.randint(P.entries // 2, 2 * P.entries)):   # outstanding
                random_read(tb)                                         # mid-packet
            for _ in range(random.randint(5, 60)):
                await RisingEdge(tb.clk)
            for _ in range(5_000):
                hit = m.outstanding >= 2 and m.pkt_state != "start"
                if hit:
                    break
                await RisingEdge(tb.clk)
        # (an entry narrower than 32 bits, as at lanes 4, holds no whole needle: then the
        # row check below stands alone, and its control is that rows are in use now)
        await scanner.control(secrets, tb.clk, 1, {"address"} | ({"entry"} if entry.size >= 32 else set()))
        assert scanner.last.nonzero(("static", "dynamic")), "control: no table row in use before the reset"
        await RisingEdge(tb.clk)
        tb.log.info("reset with %d reads outstanding, packet state %s", m.outstanding,
                    m.pkt_state)
        await tb.reset_now(host)
        got = await refused.after_reset()
        assert got == SCRUB, f"req_i refused for {got} cycles after reset, not scrub_cycles = {SCRUB}"
        await ReadOnly()
        scan = scanner.assert_clean(secrets, "after the reset")
        rows = scan.nonzero(("static", "dynamic"))
        assert not rows, f"table rows not zero after the reset: {rows}"
        await RisingEdge(tb.clk)
        assert m.outstanding == 0
    finished, reads = len(m.finished), max(64, 2 * P.entries)
    await traffic(tb, host, reads)
    assert len(m.finished) - finished == reads and not m.errors
    tb.check()


# ---- directed: bad completions --------------------------------------------------------
def cpl(tag, addr, length, beats=None, data=None):
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


@cocotb.test()
async def bad_completions(dut):
    """Each bad-completion case, between good completions of the same read without an idle
    cycle: dropped whole (no beat forwarded), counted, tag and cause latched, the read
    untouched (its legal completions still pass); then a repeated completion and one after
    the read finished. A second read stays outstanding throughout, so its tag is live."""
    tb = PcieTB(dut)
    await tb.start()
    m = tb.model
    base, length = 0x4000_0000, 512
    tb.request(tile=1, addr=0x7000, length=G)             # keeps tag 0 live meanwhile
    other = await tb.next_tag()
    for name, (which, off, clen, beats, cause) in BAD.items():
        if (which == "beyond" and P.entries == 256) or (cause is Cause.BOUNDARY and P.rcb == G):
            continue
        tb.request(tile=77, key_index=5, aes=1, addr=base, length=length)
        tag = await tb.next_tag()
        bad_tag = {"free": (tag + 1) % P.entries, "beyond": P.entries}.get(which, tag)
        assert bad_tag != other
        errors = len(m.errors)
        rest = random_split(base + P.rcb, length - P.rcb, P.rcb, P.max_payload, lanes=P.lanes)
        tb.send(cpl(tag, base, P.rcb))
        tb.send(cpl(bad_tag, base + P.rcb + off, clen, beats))
        for a, n in rest:
            tb.send(cpl(tag, a, n))
        await tb.settle()
        assert [(t, c) for _, t, c in m.errors[errors:]] == [(bad_tag, cause)], \
            f"{name}: model saw {m.errors[errors:]}, stimulus meant {cause.name}"
        assert m.finished[-1][1] == tag and m.outstanding == 1, name
        assert (int(dut.err_tag.value), int(dut.err_cause.value)) == (bad_tag, cause.value)
    # a repeated completion, and one after the read finished (its tag is free again)
    tb.request(tile=3, addr=0x800, length=2 * P.rcb)
    tag = await tb.next_tag()
    first = cpl(tag, 0x800, P.rcb)
    tb.send(first)
    tb.send(first)                                   # repeated: address behind
    tb.send(cpl(tag, 0x800 + P.rcb, P.rcb))
    tb.send(cpl(tag, 0x800 + 2 * P.rcb, P.rcb))      # after the finish: unknown tag
    await tb.settle()
    assert [c for _, _, c in m.errors[-2:]] == [Cause.ADDRESS, Cause.UNKNOWN_TAG]
    assert int(dut.err_tag.value) == tag and int(dut.err_count.value) == len(m.errors)
    tb.send(cpl(other, 0x7000, G))
    await tb.settle()
    assert m.outstanding == 0
    tb.check()


@cocotb.test()
async def framing_faults(dut):
    """Surplus beats are dropped, a short packet is padded with zero beats, both counted;
    headers and `first` of later beats are ignored."""
    tb = PcieTB(dut)
    tb.cpl_sink.set_pause(pause(0.3))
    await tb.start()
    m = tb.model
    r = P.rcb
    tb.request(tile=9, key_index=2, aes=0, addr=0x1000, length=3 * r + G)
    tag = await tb.next_tag()
    surplus = cpl(tag, 0x1000, r, beats=r // G + 2)
    short = cpl(tag, 0x1000 + r, r, beats=max(1, r // G - 3))   # not short if r is one beat
    noisy = cpl(tag, 0x1000 + 2 * r, r)
    for b in noisy[1:]:
        b.hdr, b.first = header(tag=(tag + 3) % 256, addr=0x9990, length=16), 1
    single = cpl(tag, 0x1000 + 3 * r, G, beats=2)
    for pkt in (surplus, short, noisy, single):
        tb.send(pkt)
    await tb.settle()
    assert [(t, c) for _, t, c in m.errors] == [(tag, Cause.FRAMING)] * (2 + (r > G))
    assert m.outstanding == 0 and m.finished[-1][1] == tag
    tb.check()


@cocotb.test(skip=P.lanes == 1)
async def misaligned_completions(dut):
    """lanes > 1: a completion whose address or length is not a multiple of the beat
    (16 · lanes bytes) is dropped whole — its address can never be the next expected one
    (ADDRESS), a length that is not whole beats is MALFORMED (ADDRESS first when both) —
    between the good completions of the same read, which still pass."""
    tb = PcieTB(dut)
    tb.cpl_sink.set_pause(pause(0.2))
    await tb.start()
    m = tb.model
    base, length = 0x2345_0000, 4 * P.rcb
    tb.request(tile=321, key_index=7, aes=1, addr=base, length=length)
    tag = await tb.next_tag()
    cases = []
    for off in range(16, G, 16):                  # address inside the expected beat
        cases.append((cpl(tag, base + P.rcb + off, P.rcb - G), Cause.ADDRESS))
        cases.append((cpl(tag, base + P.rcb, P.rcb - off, beats=1), Cause.MALFORMED))
        cases.append((cpl(tag, base + P.rcb, G + off), Cause.MALFORMED))
        cases.append((cpl(tag, base + P.rcb - off, off, beats=1), Cause.ADDRESS))
    tb.send(cpl(tag, base, P.rcb))
    random.shuffle(cases)
    for pkt, _ in cases:
        tb.send(pkt)
    for a, n in random_split(base + P.rcb, length - P.rcb, P.rcb, P.max_payload, lanes=P.lanes):
        tb.send(cpl(tag, a, n))
    await tb.settle()
    assert [(t, c) for _, t, c in m.errors] == [(tag, c) for _, c in cases]
    assert int(dut.err_count.value) == len(cases) and int(dut.err_cause.value) == cases[-1][1].value
    assert m.finished[-1][1] == tag and m.outstanding == 0
    tb.check()


# ---- directed: timeout -----------------------------------------------------------------
@cocotb.test()
async def completion_timeout(dut):
    """Reads left unanswered are reported after more than `timeout` cycles (and at most
    5 * ceil(timeout / 4) + a few), lowest tag first, and freed: their late completions are
    unknown tags. Answered reads never time out; timeout = 0 turns the check off."""
    tb = PcieTB(dut)
    await tb.start()
    m = tb.model
    timeout = 120
    dut.timeout.value = timeout
    n = min(P.entries, 12)
    issued = {}
    waiting = []     # tags of the reads left unanswered (all outstanding at once)
    for k in range(n):
        tb.request(tile=k, addr=0x1000 * k, length=128)
        tag = await tb.next_tag()
        issued[tag] = k
        if k % 3 == 0:      # answered at once; its tag is free for a later read
            tb.send(cpl(tag, 0x1000 * k, 128))
        else:
            waiting.append(tag)
        for _ in range(random.randrange(3)):
            await RisingEdge(tb.clk)
    for _ in range(2 * timeout + 40):
        await RisingEdge(tb.clk)
    tb.check()
    reported = sorted(t for _, t, _ in m.timeouts)
    assert reported == sorted(waiting), (reported, waiting)
    lo, hi = timeout_bounds(timeout, simultaneous=n)
    for cycle, tag, when in m.timeouts:
        assert lo <= cycle - when <= hi, f"tag {tag} reported {cycle - when} cycles after its request"
    assert int(dut.timeout_count.value) == len(reported) and int(dut.outstanding.value) == 0
    late = reported[0]
    tb.send(cpl(late, 0x1000 * issued[late], 128))
    await tb.settle()
    assert m.errors[-1][1:] == (late, Cause.UNKNOWN_TAG)
    # timeout off: nothing is reported, however long
    dut.timeout.value = 0
    tb.request(addr=0x40, length=64)
    tag = await tb.next_tag()
    for _ in range(3 * timeout):
        await RisingEdge(tb.clk)
    assert m.outstanding == 1 and int(dut.timeout_count.value) == len(reported)
    # turned on again (smaller): the waiting read times out
    dut.timeout.value = 7
    for _ in range(60):
        await RisingEdge(tb.clk)
    assert m.timeouts[-1][1] == tag and m.outstanding == 0
    # reads issued back to back expire on the same tick and are reported one per cycle;
    # a completion for the last of them, arriving before its report, is an unknown tag
    dut.timeout.value = 400
    n = min(P.entries, 8)
    for k in range(n):
        tb.request(tile=k, addr=0x2000 * k, length=64)
    addr = {}
    for _ in range(n):
        t = await tb.next_tag()
        addr[t] = 0x2000 * len(addr)
    for _ in range(1000):
        await RisingEdge(tb.clk)
        if len(m.expired_tags()) >= 3:
            break
    late = m.expired_tags()[-1]
    tb.send(cpl(late, addr[late], 64))
    await tb.settle()
    for _ in range(1000):
        if m.outstanding == 0:
            break
        await RisingEdge(tb.clk)
    assert sorted(t for _, t, _ in m.timeouts[-n:]) == sorted(addr)
    assert m.errors[-1][1:] == (late, Cause.UNKNOWN_TAG)
    assert m.errors[-1][0] < [c for c, t, _ in m.timeouts if t == late][-1], "not before its report"
    dut.timeout.value = 0
    tb.check()


@cocotb.test()
async def random_traffic_with_timeouts(dut):
    """Random traffic with a completion timeout shorter than many host round trips: reads
    time out (some part-way), their tags are reused, their late completions arrive as
    unknown tags or against the new read; the scoreboard checks every cycle."""
    tb = PcieTB(dut)
    tb.cpl_sink.set_pause(pause(0.2))
    await tb.start()
    m = tb.model
    timeout = 16 * P.entries if P.entries <= 32 else 4 * P.entries
    dut.timeout.value = timeout
    host = Host(tb, latency=(0, 2 * timeout), gap=(0, timeout // 8))
    reads = max(300, P.entries)
    await traffic(tb, host, reads, full_episodes=False)
    for _ in range(2 * timeout):
        await RisingEdge(tb.clk)
    tb.log.info("%d reads finished, %d timed out, %d error events", len(m.finished),
                len(m.timeouts), len(m.errors))
    assert m.outstanding == 0 and len(m.finished) + len(m.timeouts) == reads
    assert m.timeouts and m.finished
    dut.timeout.value = 0
    tb.check()


# ---- directed: full rate --------------------------------------------------------------
async def _cycles(tb, n):
    for _ in range(n):
        await RisingEdge(tb.clk)


def _consecutive(cycles):
    return cycles == list(range(cycles[0], cycles[0] + len(cycles))) if cycles else False


@cocotb.test()
async def full_rate(dut):
    """Inputs always valid, outputs always ready: one request and one completion beat per
    cycle. Round 1: one-beat completions, two per read back to back (the second looks up
    the entry the first updated in the cycle before). Round 2: multi-beat completions of
    all reads interleaved. req_o follows req_i one cycle later and cpl_o follows cpl_i two
    cycles later (the check register, then the output register), without a gap."""
    tb = PcieTB(dut)
    await tb.start()
    m = tb.model
    reads = min(P.entries, 32)
    for rnd in (1, 2):
        base = [0x10_0000 * rnd + 0x400 * k for k in range(reads)]
        if rnd == 1:   # two beats across an RCB: two legal one-beat completions
            spans = [[(b + P.rcb - G, G), (b + P.rcb, G)] for b in base]
        else:          # 2 RCBs, in RCB-sized completions
            spans = [[(b, P.rcb), (b + P.rcb, P.rcb)] for b in base]
        tb.start_trace()
        for k, span in enumerate(spans):
            tb.request(tile=k, addr=span[0][0], length=sum(n for _, n in span))
        await _cycles(tb, reads + 4)
        took, out = tb.trace["req_i"], tb.trace["req_o"]
        assert len(took) == reads and _consecutive(took), f"req_i took {took}"
        assert out == [c + 1 for c in took], f"req_o valid {out}, req_i took {took}"
        tags = [await tb.next_tag() for _ in range(reads)]
        order = ([(t, a, n) for t, span in zip(tags, spans) for a, n in span] if rnd == 1 else
                 [(t, *span[i]) for i in range(2) for t, span in zip(tags, spans)])
        tb.start_trace()
        beats = 0
        for t, a, n in order:
            pkt = cpl(t, a, n)
            beats += len(pkt)
            tb.send(pkt)
        await _cycles(tb, beats + 4)
        took, out = tb.trace["cpl_i"], tb.trace["cpl_o"]
        assert len(took) == beats and _consecutive(took), f"cpl_i took {took}"
        assert out == [c + 2 for c in took], f"cpl_o valid {out}, cpl_i took {took}"
        await tb.settle()
        assert not m.errors and m.outstanding == 0
    tb.trace = {}
    tb.check()


# ---- pytest entries -------------------------------------------------------------------
REGRESSIONS = {
    # a small table with the other PCIe settings: table-full episodes come quickly
    "16": {"entries": 16, "rcb": 128, "max_payload": 128, "max_read": 512},
    # the default table: 256 entries, RCB 64, MPS 256, 1 KiB reads
    "256": {},
    # 4 lanes (64-byte beats) at the SXP system's table size; RCB 128 so that a completion
    # can stop off the RCB (BOUNDARY) with whole beats
    "32_x4": {"entries": 32, "lanes": 4, "rcb": 128},
}


@pytest.mark.parametrize("params", REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_pcie_rdtable(params):
    """The whole cocotb regression on one parameter set (one Verilator build each)."""
    from tb.common.sim import run

    run("pcie_rdtable", "tb.pcie.test_pcie", params=params)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_parameters_rejected():
    import gc

    from hw.pcie import PcieReadTable

    for kwargs, error in [({"entries": 1}, ValueError), ({"entries": 300}, ValueError),
                          ({"entries": "16"}, TypeError), ({"rcb": 256}, ValueError),
                          ({"max_payload": 1024}, ValueError), ({"max_read": 96}, ValueError),
                          ({"lanes": 8}, ValueError), ({"lanes": 1.0}, TypeError)]:
        with pytest.raises(error):
            PcieReadTable(**kwargs)
    gc.collect()   # the half-built components warn now, inside the filter


@pytest.mark.parametrize("lanes", [2])
def test_wider_beats_amaranth_sim(lanes):
    """lanes = 2 (lanes 4 runs the whole regression on Verilator), in Amaranth's simulator:
    random reads, uniformly random legal splits, interleaved packet by packet, a bad
    completion and a short packet, against the model beat for beat."""
    from amaranth.sim import Simulator

    from hw.pcie import PcieReadTable

    rng = random.Random(lanes)
    params = dict(entries=4, lanes=lanes)
    dut = PcieReadTable(**params)
    model = RdTableModel(**params)
    check_reg = CheckRegister()
    p = model.params
    reads = [dict(tile=rng.randrange(1472), key_index=rng.randrange(16), aes=rng.randrange(2),
                  addr=p.granule * rng.randrange(1 << 20),
                  length=p.granule * rng.randint(1, p.max_read // p.granule))
             for _ in range(10)]
    got_req, got_cpl = [], []

    async def bench(ctx):
        pending, queue = {}, []
        todo = list(reads)
        for cycle in range(3000):
            if not (todo or pending or queue or check_reg.held) and len(got_req) == len(reads) \
                    and len(got_cpl) == len(model.cpl_out):
                break
            if todo:
                hdr = header(kind=Kind.READ_REQ, **todo[0])
                ctx.set(dut.req_i.valid, 1)
                ctx.set(dut.req_i.payload.as_value(), encode(Beat(0, hdr), lanes))
            else:
                ctx.set(dut.req_i.valid, 0)
            if not queue and pending:
                tag = rng.choice(list(pending))
                queue = pending[tag].pop(0)
                if not pending[tag]:
                    del pending[tag]
                if rng.random() < 0.1 and len(queue) > 1:      # a short packet
                    queue = queue[:-1]
                    queue[-1] = Beat(queue[-1].data, queue[-1].hdr, queue[-1].first, 1)
                elif rng.random() < 0.1:                        # and a replay-like bad one
                    queue = [Beat(1, dict(queue[0].hdr, addr=queue[0].hdr["addr"] ^ 0x40), 1, 1)] + queue
            ctx.set(dut.cpl_i.valid, int(bool(queue)))
            if queue:
                ctx.set(dut.cpl_i.payload.as_value(), encode(queue[0], lanes))
            ctx.set(dut.req_o.ready, rng.random() < 0.8)
            ctx.set(dut.cpl_o.ready, rng.random() < 0.8)
            req = cpl = None
            cpl_ready = ctx.get(dut.cpl_i.ready)
            if todo and ctx.get(dut.req_i.ready):
                req = Beat(0, header(kind=Kind.READ_REQ, **todo.pop(0)))
            if queue and ctx.get(dut.cpl_i.ready):
                cpl = queue.pop(0)
            if ctx.get(dut.req_o.valid) and ctx.get(dut.req_o.ready):
                b = decode(ctx.get(dut.req_o.payload.as_value()), lanes)
                got_req.append(b)
                r = reads[len(got_req) - 1]
                split = random_split(r["addr"], r["length"], p.rcb, p.max_payload, rng, lanes=lanes)
                pending[b.hdr["tag"]] = completion_packets(
                    b.hdr["tag"], r["addr"], rng.randbytes(r["length"]), split, lanes, rng, junk=True)
            if ctx.get(dut.cpl_o.valid) and ctx.get(dut.cpl_o.ready):
                got_cpl.append(decode(ctx.get(dut.cpl_o.payload.as_value()), lanes))
            status = {k: ctx.get(getattr(dut, k)) for k in STATUS}
            status = {k: v.value if isinstance(v, Cause) else int(v) for k, v in status.items()}
            assert status == model.status(), f"cycle {cycle}"
            model.step(req, check_reg.cycle(cpl, cpl_ready), 0)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got_req == list(model.req_out) and len(got_req) == len(reads)
    assert got_cpl == list(model.cpl_out)
    assert len(model.finished) == len(reads) and model.outstanding == 0
    assert model.errors and {c for _, _, c in model.errors} <= {Cause.ADDRESS, Cause.FRAMING}
