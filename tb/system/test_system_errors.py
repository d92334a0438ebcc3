"""The host side of ``sxp_system`` misbehaving: bad completions, lost reads, a full table.

The ITX tests (:mod:`tb.system.test_system`) drive what the runtime and its attacks send;
an untrusted host can also answer reads wrongly. These tests drive ``pcie_i`` directly
with completions they build, and the tiles' side with cleartext read requests on ``xb_i``
(region 0 opened over the host CSR port), and check the reaction docs/pcie.md and
docs/sxp.md define:

- a bad completion (unknown tag, tag past the table, overrun, wrong address, malformed,
  across the read-completion boundary) is dropped whole: no beat of it reaches ``xb_o``,
  ``rd_err_count`` + 1, ``rd_err_tag``/``rd_err_cause`` latched, the read untouched — its
  correct completions still pass, and a following read works;
- a completion whose beats disagree with its length (FRAMING) leaves as exactly its length
  in beats: surplus beats dropped, a short one padded with zero beats;
- a read that is never answered expires after the completion timeout (> T and at most
  5 · ceil(T / 4) cycles after the request): ``rd_timeout_count`` + 1, ``rd_timeout_tag``,
  the tag freed; a late completion for it is UNKNOWN_TAG and delivers nothing. An aes read
  lost that way keeps its physical context busy in the SXP (``RD_BUSY``) until reset;
- a full table (16 reads outstanding) back-pressures further reads, which take the tags
  freed by completions and by expiry, lowest first;
- the SXP's own checks inside the system (docs/sxp.md): refused read requests, an aes
  completion the table passes but the SXP refuses, short and surplus write packets, the
  write engine's FRAME, CONFIG, trusted mode entered from the host port (DENIED); and
  encrypted write and read frames on every physical context, reads parked behind them.

Expected causes, tags and output beats come from the golden model
(:class:`sw.pcie.model.RdTableModel`, stepped at transaction level with the same reads and
completions) and from the documents above, never from the RTL.
"""
import itertools
import random

import cocotb
import pytest
from cocotb.triggers import ReadOnly, RisingEdge

from hw.pcie.layout import Cause
from hw.sxp.packet import BEAT_BYTES, Kind
from hw.sxp.regs import Cause as SxpCause
from hw.sxp.regs import register_map
from sw.itx.csr import status_fields
from sw.pcie.beats import Beat, decode, encode, header
from sw.pcie.model import RdTableModel, timeout_bounds
from sw.sxp.driver import key_writes
from sw.sxp.frames import beats_of, blocks_of, blocks_of_beats, open_frame, sealed_frame, write_frame
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB
from tb.system.env import SxpCsrBus, lanes_of

PARAMS = params()
CONTEXTS = PARAMS.get("contexts", 16)
ENTRIES = PARAMS.get("entries", 32)
RCB, MAX_PAYLOAD, MAX_READ = 64, 256, 1024      # SxpSystem's defaults
CLEAR_LIMIT = 1 << 20                           # region 0: [0, 1 MiB)
SETTLE = 64                                     # cycles: pcie_i → xb_o is about 25
FILL_BEATS = 256                                # more than the SXP holds between pcie_i and xb_o


class HostSideTB(TB):
    """``sxp_system`` with every stream port a plain source or sink: read requests from
    "tiles" on ``xb_i``, their tagged requests collected from ``pcie_o``, completions
    built by the test into ``pcie_i``, and what reaches the tiles from ``xb_o``."""

    def __init__(self, dut):
        super().__init__(dut)
        self.lanes = lanes_of(dut)
        self.beat = BEAT_BYTES * self.lanes
        self.regmap = register_map(CONTEXTS)
        self.xb_src = StreamSource(dut, "xb_i", self.clk)
        self.xb_sink = StreamSink(dut, "xb_o", self.clk)
        self.req_sink = StreamSink(dut, "pcie_o", self.clk)
        self.cpl_src = StreamSource(dut, "pcie_i", self.clk)
        self.host = SxpCsrBus(dut, "host", self.clk, self.regmap)
        self.ccu = SxpCsrBus(dut, "ccu", self.clk, self.regmap)
        dut.rd_timeout.value = 0
        self.model = RdTableModel(ENTRIES, RCB, MAX_PAYLOAD, MAX_READ, self.lanes)

    async def start(self):
        await self.reset()
        self.xb_sink.clear()
        self.req_sink.clear()
        await self.cycles(ENTRIES + 4)                  # the table's reset scrub
        await self.host.write(self.regmap["KSEL_BASE0"].addr, 0)
        await self.host.write(self.regmap["KSEL_LIMIT0"].addr, CLEAR_LIMIT)

    # ---- tiles' side --------------------------------------------------------------------
    def send_read(self, tile, addr, length, **hdr):
        self.xb_src.send(encode(Beat(0, header(kind=Kind.READ_REQ, tile=tile, addr=addr,
                                               length=length, **hdr)), self.lanes))

    async def requests(self, n, timeout=2000):
        """The next *n* read requests leaving on ``pcie_o`` (headers)."""
        return [decode(await self.req_sink.recv(timeout), self.lanes).hdr for _ in range(n)]

    async def read(self, tile, addr, length):
        """One cleartext read through the SXP into the table; its header with the tag
        (also entered into the model, which must give the same lowest free tag)."""
        self.send_read(tile, addr, length)
        (h,) = await self.requests(1)
        tag = self.model.request(tile=tile, addr=addr, length=length)
        assert (h["tag"], h["addr"], h["length"]) == (tag, addr, length), \
            f"request left as {h}, the model allocated tag {tag}"
        return h

    def delivered(self):
        """The beats that reached the tiles since the last call."""
        beats = [decode(v, self.lanes) for v in self.xb_sink.queue]
        self.xb_sink.queue.clear()
        return beats

    # ---- host side ------------------------------------------------------------------------
    def completion(self, tag, addr, length, beats=None, rng=random):
        """A completion packet (random data): *beats* beats (default: its length's)."""
        n = beats if beats is not None else max(1, -(-length // self.beat))
        h = header(kind=Kind.READ_CPL, tag=tag, addr=addr, length=length)
        return [Beat(rng.getrandbits(8 * self.beat), h, int(i == 0), int(i == n - 1))
                for i in range(n)]

    def send(self, packet):
        """Into ``pcie_i``; the model takes it too. Returns what the model says leaves."""
        for b in packet:
            self.cpl_src.send(encode(b, self.lanes))
        return self.model.send(packet)

    async def settle(self, cycles=SETTLE):
        await self.cpl_src.wait_idle()
        await self.cycles(cycles)

    # ---- status -------------------------------------------------------------------------
    def status(self):
        d = self.dut
        return {"err_count": int(d.rd_err_count.value), "err_tag": int(d.rd_err_tag.value),
                "err_cause": int(d.rd_err_cause.value),
                "timeout_count": int(d.rd_timeout_count.value),
                "timeout_tag": int(d.rd_timeout_tag.value),
                "outstanding": int(d.rd_outstanding.value)}

    def assert_delivered(self, expected, what):
        """``xb_o`` carried exactly the model's *expected* beats (data, tile, address,
        length, ``cc``, framing): cleartext completions pass the SXP unchanged."""
        got = self.delivered()
        key = lambda b: (b.data, b.hdr["tile"], b.hdr["addr"], b.hdr["length"],  # noqa: E731
                         b.hdr["cc"], b.first, b.last)
        assert [key(b) for b in got] == [key(b) for b in expected], \
            f"{what}: xb_o carried {len(got)} beats {got[:3]}…, expected {len(expected)}"


async def started(dut):
    tb = HostSideTB(dut)
    await tb.start()
    return tb


def bad_cases(tb):
    """(name, tag, addr offset from the next expected byte, length, beats, cause) of each
    bad completion against a read with *tb.beat*-sized granules, expecting more than
    max_payload; from the cause table of docs/pcie.md."""
    g = tb.beat
    cases = [
        ("free tag", "free", 0, RCB, None, Cause.UNKNOWN_TAG),
        ("tag past the table", ENTRIES + 3, 0, RCB, None, Cause.UNKNOWN_TAG),
        ("overrun", "read", 0, MAX_READ, None, Cause.OVERRUN),
        ("address ahead", "read", RCB, RCB, None, Cause.ADDRESS),
        ("address behind (a repeat)", "read", -RCB, RCB, None, Cause.ADDRESS),
        ("address off the beat", "read", 8, RCB, None, Cause.ADDRESS),
        ("length 0", "read", 0, 0, 1, Cause.MALFORMED),
        ("length past max_payload", "read", 0, 2 * MAX_PAYLOAD, None, Cause.MALFORMED),
        ("length off the beat", "read", 0, g + 8, 2, Cause.MALFORMED),
    ]
    if RCB > g:     # at one beat per RCB every completion ends on it
        cases.append(("ends off the RCB", "read", 0, g, None, Cause.BOUNDARY))
    return cases


@cocotb.test()
async def bad_completions_dropped(dut):
    """Each bad completion between two good ones of the same read: dropped whole (nothing
    reaches the tiles), counted, tag and cause latched; the read is untouched, its
    remaining completions pass and finish it, the tag is freed."""
    tb = await started(dut)
    base, length = 0x4000, MAX_READ
    keep = await tb.read(7, 0x9000, tb.beat)         # a second live tag throughout
    for name, which, off, clen, beats, cause in bad_cases(tb):
        h = await tb.read(3, base, length)
        tag = h["tag"]
        bad_tag = {"read": tag, "free": max(tag, keep["tag"]) + 1}.get(which, which)
        before = tb.status()
        out = tb.send(tb.completion(tag, base, RCB))
        out += tb.send(tb.completion(bad_tag, base + RCB + off, clen, beats))
        errors = list(tb.model.errors)
        for a in range(base + RCB, base + length, MAX_PAYLOAD):
            n = min(MAX_PAYLOAD, base + length - a)
            out += tb.send(tb.completion(tag, a, n))
        await tb.settle()
        assert [(t, c) for _, t, c in errors] == [(bad_tag, cause)], \
            f"{name}: the model saw {errors}; the stimulus meant {cause.name}"
        tb.model.errors.clear()
        st = tb.status()
        assert st["err_count"] == before["err_count"] + 1, f"{name}: not counted: {st}"
        assert (st["err_tag"], st["err_cause"]) == (bad_tag, cause.value), \
            f"{name}: latched tag {st['err_tag']} cause {Cause(st['err_cause']).name}"
        tb.assert_delivered(out, name)
        assert out[-1].hdr["cc"] and st["outstanding"] == 1, f"{name}: read not finished: {st}"
        base += length
    out = tb.send(tb.completion(keep["tag"], 0x9000, tb.beat))
    await tb.settle()
    tb.assert_delivered(out, "the read kept live")
    assert tb.status()["outstanding"] == 0


@cocotb.test()
async def completion_after_the_read_finished(dut):
    """A completion repeated after its read finished (tag free again): UNKNOWN_TAG, dropped;
    the next read takes the same tag and a repeat of the old completion is now checked
    against the new read (ADDRESS), as docs/pcie.md describes; the new read completes."""
    tb = await started(dut)
    h = await tb.read(1, 0x1000, RCB)
    old = tb.completion(h["tag"], 0x1000, RCB)
    out = tb.send(old)
    out += tb.send(old)
    await tb.settle()
    tb.assert_delivered(out, "finished read")
    assert [c for _, _, c in tb.model.errors] == [Cause.UNKNOWN_TAG]
    assert (tb.status()["err_cause"], tb.status()["err_tag"]) == (Cause.UNKNOWN_TAG.value, h["tag"])
    h2 = await tb.read(2, 0x2000, RCB)
    assert h2["tag"] == h["tag"], "the lowest free tag was not reused"
    out = tb.send(old)
    out += tb.send(tb.completion(h2["tag"], 0x2000, RCB))
    await tb.settle()
    assert [c for _, _, c in tb.model.errors] == [Cause.UNKNOWN_TAG, Cause.ADDRESS]
    tb.assert_delivered(out, "reused tag")
    st = tb.status()
    assert st["err_count"] == 2 and st["err_cause"] == Cause.ADDRESS.value and st["outstanding"] == 0


@cocotb.test()
@cocotb.parametrize(held_back=[False, True])
async def framing_repaired(dut, held_back):
    """Completions whose beat count disagrees with their length: exactly length / beat
    bytes beats leave (surplus dropped, a short one padded with zero beats), FRAMING
    counted with the read's tag, the read finishes; the next completion, sent right
    behind, is not disturbed. *held_back*: the tiles' side stops until the SXP is full and
    ``pcie_i`` held back (a control checks it), then takes one beat in four, so the table
    pads while its output waits."""
    tb = await started(dut)
    g = tb.beat
    r = max(RCB, 3 * g)       # at least three beats each, a multiple of the RCB, 5r + g <= 1 KiB
    h = await tb.read(4, 0x3000, 5 * r + g)
    tag = h["tag"]
    packets = [tb.completion(tag, 0x3000, r, beats=r // g + 2),          # surplus
               tb.completion(tag, 0x3000 + r, r, beats=r // g - 2),      # short: padded
               tb.completion(tag, 0x3000 + 2 * r, r, beats=1),           # ends on its first beat
               tb.completion(tag, 0x3000 + 3 * r, r, beats=r // g + 1),  # surplus
               tb.completion(tag, 0x3000 + 4 * r, r),
               tb.completion(tag, 0x3000 + 5 * r, g, beats=3)]           # one beat, two surplus
    out = []
    if held_back:
        tb.xb_sink.enabled = False
        fill = [await tb.read(4, 0x8000 + MAX_READ * i, MAX_READ)   # answered ahead of the faults
                for i in range(min(FILL_BEATS * g // MAX_READ, ENTRIES - 1))]
        for f in fill:
            for a in range(f["addr"], f["addr"] + MAX_READ, MAX_PAYLOAD):
                out += tb.send(tb.completion(f["tag"], a, MAX_PAYLOAD))
    for p in packets:
        out += tb.send(p)
    if held_back:
        await tb.cycles(2 * SETTLE)
        assert tb.cpl_src.queue, "control: the stopped tiles' side never held pcie_i back"
        tb.xb_sink.set_pause(itertools.cycle([True, True, True, False]))
        tb.xb_sink.enabled = True
    await tb.settle(8 * SETTLE if held_back else SETTLE)
    errors = [(t, c) for _, t, c in tb.model.errors]
    assert errors and set(errors) == {(tag, Cause.FRAMING)}, errors
    tb.assert_delivered(out, "framing")
    st = tb.status()
    assert st["err_count"] == len(errors) and st["err_cause"] == Cause.FRAMING.value
    assert st["outstanding"] == 0


class StatusLog:
    """Per cycle (sampled after each edge): the read requests leaving ``pcie_o`` and the
    timeout reports (``rd_timeout_count`` stepping up, with ``rd_timeout_tag``)."""

    def __init__(self, tb):
        self.tb, self.now = tb, 0
        self.issued = {}        # tag -> cycle its latest request left on pcie_o
        self.reports = []       # (cycle, tag, cycle of the request)
        self._count = 0
        self._task = cocotb.start_soon(self._run())

    def stop(self):
        """Before a reset (which clears the counters)."""
        self._task.cancel()

    async def _run(self):
        d, lanes = self.tb.dut, self.tb.lanes
        while True:
            await RisingEdge(self.tb.clk)
            await ReadOnly()
            self.now += 1
            if int(d.pcie_o__valid.value) and int(d.pcie_o__ready.value):
                h = decode(int(d.pcie_o__payload.value), lanes).hdr
                if h["kind"] == Kind.READ_REQ.value:
                    self.issued[h["tag"]] = self.now
            count = int(d.rd_timeout_count.value)
            if count != self._count:
                assert count == self._count + 1, f"timeout_count jumped {self._count} -> {count}"
                tag = int(d.rd_timeout_tag.value)
                self.reports.append((self.now, tag, self.issued.get(tag)))
                self._count = count

    def assert_bounds(self, timeout, simultaneous):
        """Each report more than *timeout* cycles after its request left (the tag was
        allocated one cycle before that) and at most :func:`timeout_bounds`' maximum."""
        lo, hi = timeout_bounds(timeout, simultaneous)
        for cycle, tag, issued in self.reports:
            assert lo - 1 <= cycle - issued <= hi, \
                f"tag {tag} reported {cycle - issued} cycles after its request ({lo}..{hi})"


async def wait_for(tb, cond, limit, what):
    """Until *cond()* holds after an edge; AssertionError after *limit* cycles."""
    for _ in range(limit):
        await RisingEdge(tb.clk)
        if cond():
            return
    raise AssertionError(f"{what} not within {limit} cycles: {tb.status()}")


@cocotb.test()
async def lost_reads_time_out(dut):
    """The table filled (16 reads, the 17th waits), a quarter answered, the rest never:
    each lost read is reported once (``rd_timeout_count`` + 1, ``rd_timeout_tag``, one per
    cycle) and freed, within the bounds of docs/pcie.md; the waiting read takes the lowest
    tag freed; late completions for the lost reads are UNKNOWN_TAG and deliver nothing; a
    read after the timeouts works, and timeout = 0 stops the ageing."""
    tb = await started(dut)
    log = StatusLog(tb)
    T = 160
    dut.rd_timeout.value = T
    for i in range(ENTRIES + 1):
        tb.send_read(5, 0x10000 + 0x400 * i, RCB)
    hdrs = await tb.requests(ENTRIES)
    assert sorted(h["tag"] for h in hdrs) == list(range(ENTRIES))
    await tb.cycles(8)
    assert not tb.req_sink.queue and tb.status()["outstanding"] == ENTRIES, \
        "a read left with every tag outstanding"
    answered = hdrs[::4]
    out = []
    for h in answered:
        p = tb.completion(h["tag"], h["addr"], RCB)
        for b in p:
            tb.cpl_src.send(encode(b, tb.lanes))
        out += p
    (waiting,) = await tb.requests(1)
    assert waiting["tag"] == answered[0]["tag"], "the waiting read did not take the lowest freed tag"
    lost = [h for h in hdrs if h not in answered] + [waiting]
    await wait_for(tb, lambda: len(log.reports) == len(lost), 8 * T, "every lost read reported")
    await tb.cycles(4)
    assert sorted(t for _, t, _ in log.reports) == sorted(h["tag"] for h in lost), \
        f"reports {log.reports}: not every lost read exactly once"
    log.assert_bounds(T, len(lost))
    got = tb.delivered()
    assert [b.data for b in got] == [b.data for b in out], "the answered reads' data"
    st = tb.status()
    assert st["outstanding"] == 0 and st["timeout_count"] == len(lost) and st["err_count"] == 0, st
    for h in lost:
        for b in tb.completion(h["tag"], h["addr"], RCB):
            tb.cpl_src.send(encode(b, tb.lanes))
    await tb.settle()
    assert not tb.delivered(), "a late completion reached the tiles"
    st = tb.status()
    assert st["err_count"] == len(lost) and st["err_cause"] == Cause.UNKNOWN_TAG.value, st
    dut.rd_timeout.value = 0
    await tb.cycles(2)
    tb.model.reset()
    h = await tb.read(6, 0x30000, RCB)
    await tb.cycles(8 * T)
    assert tb.status()["outstanding"] == 1 and tb.status()["timeout_count"] == len(lost), \
        "a read timed out with timeout = 0"
    out = tb.send(tb.completion(h["tag"], 0x30000, RCB))
    await tb.settle()
    tb.assert_delivered(out, "a read after the timeouts")
    assert tb.status()["outstanding"] == 0


@cocotb.test()
async def expiry_races_completions(dut):
    """Eight reads expire (reported one per cycle) while the eight reads issued after them
    finish and six more reads, held back while the table was full, take the freed tags:
    frees by completion and by expiry in the same cycles as allocations. Every lost read
    is reported once, every answered read delivered whole, the held-back reads get tags
    and complete; the table ends empty."""
    tb = await started(dut)
    log = StatusLog(tb)
    T, half = 200, ENTRIES // 2
    dut.rd_timeout.value = T
    for i in range(half):
        tb.send_read(1, 0x40000 + 0x100 * i, tb.beat)
    first = await tb.requests(half)
    await tb.cycles(T // 3)
    for i in range(ENTRIES - half + 6):
        tb.send_read(2, 0x50000 + 0x100 * i, tb.beat)
    second = await tb.requests(ENTRIES - half)
    assert tb.status()["outstanding"] == ENTRIES
    await wait_for(tb, lambda: log.reports, 4 * T, "the first timeout report")
    out = []
    for h in second:
        p = tb.completion(h["tag"], h["addr"], tb.beat)
        for b in p:
            tb.cpl_src.send(encode(b, tb.lanes))
        out += p
    late = await tb.requests(6)
    for h in late:
        p = tb.completion(h["tag"], h["addr"], tb.beat)
        for b in p:
            tb.cpl_src.send(encode(b, tb.lanes))
        out += p
    await tb.settle()
    assert sorted(t for _, t, _ in log.reports) == sorted(h["tag"] for h in first), \
        f"reports {log.reports}: not every lost read exactly once"
    log.assert_bounds(T, half)
    assert {h["tag"] for h in late} <= {h["tag"] for h in first} | {h["tag"] for h in second}
    got = tb.delivered()
    assert sorted(b.data for b in got) == sorted(b.data for b in out)
    st = tb.status()
    assert st["outstanding"] == 0 and st["err_count"] == 0 and st["timeout_count"] == half, st


@cocotb.test()
async def lost_aes_read_keeps_its_context_busy(dut):
    """An aes read the host never answers: the table reports its timeout, but the SXP's
    context stays busy (RD_BUSY, docs/sxp.md: "until reset") and a second read on it stays
    parked; the late completion is UNKNOWN_TAG and reaches neither the SXP's engine nor
    the tiles (no exception, nothing on ``xb_o``). A reset frees the context."""
    tb = await started(dut)
    log = StatusLog(tb)
    base = 0x200000
    await tb.host.write(tb.regmap["KSEL_BASE1"].addr, base)        # KPHYSMAP0 = region 1
    await tb.host.write(tb.regmap["KSEL_LIMIT1"].addr, base + 0x10000)
    dut.rd_timeout.value = 100
    tb.send_read(9, base, 2 * RCB, aes=1, xbctx=0)
    (h,) = await tb.requests(1)
    assert h["aes"] == 1 and h["key_index"] == 0, h
    tb.send_read(9, base + 0x400, 2 * RCB, aes=1, xbctx=0)          # parks behind it
    await wait_for(tb, lambda: log.reports, 1000, "the timeout report")
    assert log.reports[0][1] == h["tag"]
    rd_busy = await tb.host.read(tb.regmap["RD_BUSY"].addr)
    assert rd_busy & 1, f"RD_BUSY {rd_busy:#x}: context 0 released by the table's timeout"
    for b in tb.completion(h["tag"], base, 2 * RCB):
        tb.cpl_src.send(encode(b, tb.lanes))
    await tb.settle(200)
    assert not tb.req_sink.queue, "the parked read left although its context is busy"
    assert not tb.delivered() and not int(dut.irq.value)
    st = tb.status()
    assert (st["err_count"], st["err_tag"], st["err_cause"]) == (1, h["tag"], Cause.UNKNOWN_TAG.value)
    assert (await tb.host.read(tb.regmap["RD_BUSY"].addr)) & 1
    log.stop()
    await tb.reset()
    await tb.cycles(ENTRIES + 4)
    assert await tb.host.read(tb.regmap["RD_BUSY"].addr) == 0, "reset did not free the context"


# ---- the SXP's exceptions at system level ---------------------------------------------------
REGION_BYTES = 0x10000


def region_base(phys):
    """Key region phys + 1 (KPHYSMAP's reset value) of the tests: 64 KiB above region 0."""
    return CLEAR_LIMIT + REGION_BYTES * phys


async def aes_setup(tb):
    """Over the host port: key regions 1..contexts, xbctx k → physical context k, and a key
    in each context (KEY_Wn and KEY_COMMIT written by the host, allowed outside trusted
    mode)."""
    keys = {}
    for k in range(CONTEXTS):
        tb.host.defer(tb.regmap[f"KSEL_BASE{k + 1}"].addr, region_base(k))
        tb.host.defer(tb.regmap[f"KSEL_LIMIT{k + 1}"].addr, region_base(k) + REGION_BYTES)
        tb.host.defer(tb.regmap[f"KXBCTXMAP{k}"].addr, k)
        keys[k] = random.randbytes(32)
        writes = key_writes(k, keys[k])
        for addr, value in writes[:-1]:
            tb.host.defer(addr, value)
        tb.host.defer_key_idle()
        tb.host.defer(*writes[-1])
    tb.host.defer_key_idle()
    await tb.host.flush()
    return keys


async def expect_exception(tb, cause, tile, addr, kind, what):
    """STATUS.exc and ``irq`` set with the record (cause, EXC_TILE, EXC_ADDR) of the first
    exception; acknowledged by the host (write 1 to STATUS.exc), ``irq`` falls."""
    for _ in range(200):
        st = await tb.host.status()
        if st["exc"]:
            break
    else:
        raise AssertionError(f"{what}: no exception")
    assert int(tb.dut.irq.value), f"{what}: STATUS.exc without irq"
    rec_tile = status_fields(tb.regmap, await tb.host.read(tb.regmap["EXC_TILE"].addr), "EXC_TILE")
    rec_addr = await tb.host.read(tb.regmap["EXC_ADDR"].addr)
    assert (SxpCause(st["cause"]), rec_tile["tile"], rec_tile["kind"], rec_addr) == \
        (cause, tile, kind.value, addr), \
        f"{what}: latched {SxpCause(st['cause']).name} tile {rec_tile} addr {rec_addr:#x}"
    await tb.host.write(tb.regmap["STATUS"].addr, 1)
    await tb.cycles(4)
    assert not int(tb.dut.irq.value) and not (await tb.host.status())["exc"], \
        f"{what}: the acknowledge did not clear the exception"


def write_packet(tb, tile, xbctx, addr, blocks, beats=None, cc=1):
    """An aes write request of *blocks* (one packet); *beats*: send only that many beats,
    the last with ``last`` (a packet shorter than its length)."""
    data = beats_of(blocks, tb.lanes)
    n = len(data) if beats is None else beats
    h = header(kind=Kind.WRITE_REQ, tile=tile, xbctx=xbctx, addr=addr, aes=1, cc=cc,
               length=len(data) * tb.beat)
    for i in range(n):
        tb.xb_src.send(encode(Beat(data[i], h, int(i == 0), int(i == n - 1)), tb.lanes))
    return len(data)


@cocotb.test()
async def sxp_exceptions_from_both_sides(dut):
    """The SXP's checks inside the system (docs/sxp.md § Checks): read requests from the
    tiles refused (MALFORMED, CLEAR, REGION, MAP: nothing leaves on ``pcie_o``); an aes
    completion the table forwards but the SXP refuses (a one-beat ``cc`` completion
    opening a frame: MALFORMED, nothing to the tiles, the context's read over); an aes write
    with too few beats on every context (MALFORMED; exactly its length in beats leaves,
    zero from the beat where the error shows); CONFIG on trust with KPHYSMAP not 1:1.
    Each is latched with tile, address and kind, raises ``irq``, and is cleared by the host's
    write 1 to STATUS.exc. Then trusted mode from the host port: host reads return zero and
    host writes are refused, both counted in DENIED (read over the CCU port)."""
    tb = await started(dut)
    await aes_setup(tb)
    g = tb.beat
    cases = [("read off the beat", dict(addr=0x100 + g // 2, length=g), SxpCause.MALFORMED),
             ("clear read past region 0", dict(addr=CLEAR_LIMIT - g, length=2 * g), SxpCause.CLEAR),
             ("aes read past its region", dict(addr=region_base(1) + REGION_BYTES - g, length=2 * g,
                                               aes=1, xbctx=1), SxpCause.REGION)]
    for what, h, cause in cases:
        tb.send_read(21, **h)
        await expect_exception(tb, cause, 21, h["addr"], Kind.READ_REQ, what)
    await tb.host.write(tb.regmap["KXBCTXMAP5"].addr, CONTEXTS + 1)   # no such context
    tb.send_read(22, region_base(0), 2 * g, aes=1, xbctx=5)
    await expect_exception(tb, SxpCause.MAP, 22, region_base(0), Kind.READ_REQ, "xbctx unmapped")
    assert not tb.req_sink.queue, "a refused read left on pcie_o"
    # a one-beat cc completion opening a frame: the table forwards it, the SXP refuses it
    tb.send_read(23, region_base(2), g, aes=1, xbctx=2)
    (h,) = await tb.requests(1)
    assert (h["aes"], h["key_index"]) == (1, 2), h
    tb.send(tb.completion(h["tag"], region_base(2), g))
    await expect_exception(tb, SxpCause.MALFORMED, 23, region_base(2), Kind.READ_CPL,
                           "one-beat cc completion")
    await tb.settle()
    assert not tb.delivered(), "the refused completion reached the tile"
    assert await tb.host.read(tb.regmap["RD_BUSY"].addr) == 0, "the read was not over"
    # an aes write packet too short on each context
    for k in range(CONTEXTS):
        nblocks = MAX_PAYLOAD // 16 if tb.lanes > 1 else 8     # 4 or 8 beats
        blocks = write_frame(random.randbytes(12), random.randbytes(16 * (nblocks - 2)))
        sent = nblocks // tb.lanes // 2
        n = write_packet(tb, 30 + k, k, region_base(k), blocks, beats=sent)
        await expect_exception(tb, SxpCause.MALFORMED, 30 + k, region_base(k), Kind.WRITE_REQ,
                               f"short write on context {k}")
        beats = [decode(await tb.req_sink.recv(500), tb.lanes) for _ in range(n)]
        await tb.cycles(SETTLE)
        beats += [decode(v, tb.lanes) for v in tb.req_sink.queue]
        tb.req_sink.queue.clear()
        assert len(beats) == n and beats[-1].last and not any(b.last for b in beats[:-1]), \
            f"context {k}: {len(beats)} beats left for a packet of {n}"
        assert all(b.data == 0 for b in beats[sent - 1:]), \
            f"context {k}: data left from the beat where the error showed"
    # the write engine refuses an IV whose tail is not 00000001: FRAME, the beats leave zero
    blocks = write_frame(random.randbytes(12), random.randbytes(16 * (2 * tb.lanes - 2)))
    blocks[0] ^= 1 << 127
    n = write_packet(tb, 40, 1, region_base(1), blocks)
    await expect_exception(tb, SxpCause.FRAME, 40, region_base(1), Kind.WRITE_REQ, "IV tail")
    beats = [decode(await tb.req_sink.recv(500), tb.lanes) for _ in range(n)]
    assert all(b.data == 0 for b in beats), "a refused write frame left data"
    # a one-beat cc write on a context with no open frame (IV and tag at once)
    write_packet(tb, 41, 2, region_base(2), blocks[:tb.lanes])
    await expect_exception(tb, SxpCause.MALFORMED, 41, region_base(2), Kind.WRITE_REQ,
                           "one-beat cc write")
    # a clear write with surplus beats: exactly its length leaves, the surplus is dropped
    h = header(kind=Kind.WRITE_REQ, tile=42, addr=0x8000, length=2 * g)
    data = [random.getrandbits(8 * g) for _ in range(4)]
    for i, d in enumerate(data):
        tb.xb_src.send(encode(Beat(d, h, int(i == 0), int(i == 3)), tb.lanes))
    await expect_exception(tb, SxpCause.MALFORMED, 42, 0x8000, Kind.WRITE_REQ, "surplus beats")
    await tb.settle()
    beats = [decode(v, tb.lanes) for v in tb.req_sink.queue]
    tb.req_sink.queue.clear()
    assert [(b.data, b.last) for b in beats] == [(data[0], 0), (0, 1)], \
        f"clear write with surplus beats left as {beats}"
    # CONFIG: trust requested by the host with two contexts on one region
    await tb.host.write(tb.regmap["KPHYSMAP1"].addr, 1)
    await tb.host.write(tb.regmap["CTRL"].addr, 1)
    await expect_exception(tb, SxpCause.CONFIG, 0, 0, Kind(0), "KPHYSMAP not 1:1")   # record 0, 0, 0
    assert not (await tb.host.status())["trusted"]
    # trusted mode entered from the host port: the host is locked out, and counted
    await tb.host.write(tb.regmap["KPHYSMAP1"].addr, 2)
    await tb.host.write(tb.regmap["CTRL"].addr, 1)
    st = await tb.ccu.wait_trusted()
    assert st["trusted"] and not st["exc"], st
    denied = await tb.ccu.read(tb.regmap["DENIED"].addr)
    assert await tb.host.read(tb.regmap["KPHYSMAP0"].addr) == 0, "a host read in trusted mode"
    await tb.host.write(tb.regmap["KSEL_LIMIT0"].addr, 0)
    assert await tb.ccu.read(tb.regmap["KSEL_LIMIT0"].addr) == CLEAR_LIMIT, "a host write took effect"
    assert await tb.ccu.read(tb.regmap["DENIED"].addr) == denied + 2


@cocotb.test()
async def aes_frames_on_every_context(dut):
    """Encrypted traffic through the whole system on every physical context: a write
    frame per context opens in AESGCM under that context's key; two reads per context,
    the second parked until the first's ``cc`` completion (RD_BUSY shows every context
    busy, only one request per context on ``pcie_o``); the first reads answered in reverse
    context order, then the released ones; each tile gets the plaintext and the verified
    tag; no exception, table empty."""
    tb = await started(dut)
    keys = await aes_setup(tb)
    size = MAX_PAYLOAD        # IV, data and tag beats at every lanes; one completion each
    for k in range(CONTEXTS):
        plain = random.randbytes(size - 32)
        n = write_packet(tb, 50 + k, k, region_base(k), write_frame(random.randbytes(12), plain))
        beats = [decode(await tb.req_sink.recv(500), tb.lanes) for _ in range(n)]
        assert open_frame(keys[k], blocks_of_beats([b.data for b in beats], tb.lanes)) == plain, \
            f"context {k}: the write frame does not open under its key"
    frames, reads = {}, {}
    for k in range(CONTEXTS):
        for j in range(2):
            addr = region_base(k) + 0x400 * j
            frames[addr] = (random.randbytes(12), random.randbytes(size - 32))
            tb.send_read(60 + k, addr, size, aes=1, xbctx=k)
    first = await tb.requests(CONTEXTS)
    await tb.cycles(SETTLE)
    assert not tb.req_sink.queue, "a second read on a busy context left"
    assert await tb.host.read(tb.regmap["RD_BUSY"].addr) == (1 << CONTEXTS) - 1

    def answer(h):
        nonce, plain = frames[h["addr"]]
        sealed = sealed_frame(keys[h["key_index"]], nonce, plain)
        beats = beats_of(sealed, tb.lanes)
        hdr = header(kind=Kind.READ_CPL, tag=h["tag"], addr=h["addr"], length=size)
        for i, d in enumerate(beats):
            tb.cpl_src.send(encode(Beat(d, hdr, int(i == 0), int(i == len(beats) - 1)), tb.lanes))
        reads[h["addr"]] = sealed

    for h in sorted(first, key=lambda h: -h["key_index"]):
        answer(h)
    for h in await tb.requests(CONTEXTS):
        answer(h)
    await tb.settle(2 * SETTLE)
    got = {}
    for b in tb.delivered():
        got.setdefault(b.hdr["addr"], []).append(b.data)
    assert sorted(got) == sorted(reads), "not every read frame reached its tile"
    for addr, sealed in reads.items():
        nonce, plain = frames[addr]
        assert blocks_of_beats(got[addr], tb.lanes) == sealed[:1] + blocks_of(plain) + sealed[-1:], \
            f"read frame at {addr:#x}: not the plaintext and its verified tag"
    assert not int(dut.irq.value) and await tb.host.read(tb.regmap["EXC_COUNT"].addr) == 0
    assert await tb.host.read(tb.regmap["RD_BUSY"].addr) == 0 and tb.status()["outstanding"] == 0


# ---- pytest entry ---------------------------------------------------------------------------
@pytest.mark.parametrize("design", ["sxp_system", "sxp_system_x4"])
def test_sxp_system_errors(design):
    """The host-side error tests on the builds of test_system.test_sxp_system (4 physical
    contexts, 16 read-table entries; lanes 1 and 4)."""
    from tb.common.sim import run

    run(design, "tb.system.test_system_errors", params={"contexts": 4, "entries": 16})
