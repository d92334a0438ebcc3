"""cocotb environment of the Secure Exchange Pipe (hw/sxp) at ``lanes`` 1 (design ``sxp``) and
4 (``sxp_x4``): :class:`SxpTB` (stream drivers on the four ports, both CSR ports, the monitor
and the scoreboard against the golden model sw/sxp/model.py), the packet builders, and the
checks and traffic the tests (tb/sxp/test_sxp.py) and the benchmark (bench_sxp.py) share.

Scoreboard: a monitor feeds the model every packet the SXP accepts on ``xb_i`` and
``pcie_i``, in the order their last beats are accepted (a request before a completion of
the same cycle), and every CSR write as it happens. At the end of a test the beats seen on
``pcie_o`` must equal the model's, beat by beat and in order, except parked reads, which
may leave anywhere after their context is released (matched as a multiset); ``xb_o`` must
equal the model's completions beat by beat. Whether an aes read parks is decided where the
read meets its context's release, inside the SXP, not at the ports: a read the model passes
(its context's ``cc`` completion was accepted first) still parks in the RTL if that
completion's release, held up by back-pressure on ``xb_o``, has not reached the parking
stage yet. The monitor counts the releases it sees on the parking stage's ``release`` input
against the model's; a read the model passes while its context has a release still on the
way may leave in either place and is matched with the parked reads. A release the model
did not make is an error. Exception count, latched record and counters
are read over the CSR ports and compared with the model. The monitor also checks, on the
ports themselves, the one-read-per-context rule and the framing of both outputs: packets
never interleave, the header is constant within a packet, and a packet has exactly
``length / (16·L)`` beats (one for a read request).

Frames are built as lists of 16-byte blocks (sw/sxp/frames.py) and packed into beats of L
lanes (:func:`~sw.sxp.frames.beats_of`) only when they become packets. The lanes of the
design under test come from ``SIM_PARAMS`` or, for a registered design such as ``sxp_x4``,
from the width of ``xb_i``'s payload. Nothing here assumes a latency: helpers wait for the
outputs (``drain``) or for a register to change (``wait_trusted``).
"""
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.aes.layout import BLOCK_BITS
from hw.sxp.packet import MAX_FRAME_BYTES, Header, Kind, beat_layout
from hw.sxp.regs import Cause, register_map
from sw.sxp.config import program, random_config
from sw.sxp.driver import QueuedBus, SxpCsrDriver
from sw.sxp.frames import beats_of, blocks_of_beats, sealed_frame, split_sizes, write_frame
from sw.sxp.model import Packet, SxpModel, header
from tb.common.csr import CsrBus
from tb.common.payload import pack, unpack
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource, never, random_pause
from tb.common.tb import TB

from .cover import SxpCoverage

__all__ = [
    "BB", "BEAT", "CONTEXTS", "CTRL", "DENIED", "EXC_ADDR", "EXC_COUNT", "EXC_TILE", "LANES",
    "LANE_MASK", "PARAMS", "RD_BUSY", "STATUS",
    "SxpTB",
    "beat_dict", "beat_int", "blocks_out", "expect_exception", "fmt", "frame_packets",
    "full_rate_traffic", "misaligned_packets", "rand_addr", "rand_beats", "request_cases",
    "settle", "setup", "small_frame", "transfer_cycles", "wait_trusted",
]

PARAMS = params()
CONTEXTS = PARAMS.get("contexts", 16)


def _lanes():
    """Lanes of the design under test: from SIM_PARAMS, else from the width of ``xb_i``'s
    payload (a registered design like ``sxp_x4`` runs with empty SIM_PARAMS); 1 when
    pytest imports this module outside a simulation."""
    if "lanes" in PARAMS:
        return PARAMS["lanes"]
    top = getattr(cocotb, "top", None)
    if top is None:
        return 1
    return (len(top.xb_i__payload) - Header.size - 2) // BLOCK_BITS


LANES = _lanes()
BB = 16 * LANES                 # bytes per beat: every address and length is a multiple
BEAT = beat_layout(LANES)
LANE_MASK = (1 << BLOCK_BITS) - 1
# register addresses from the register map, never retyped
_ADDR = {r.name: r.addr for r in register_map()}
CTRL, STATUS, EXC_ADDR, EXC_TILE, EXC_COUNT, DENIED, RD_BUSY = (
    _ADDR[n] for n in ("CTRL", "STATUS", "EXC_ADDR", "EXC_TILE", "EXC_COUNT", "DENIED", "RD_BUSY"))


def beat_int(b):
    """A beat (dict of ``BEAT``, its header a dict of ``Header``) as the port payload int."""
    return pack(BEAT, data=b["data"], hdr=pack(Header, **b["hdr"]), first=b["first"],
                last=b["last"])


def beat_dict(v):
    """A port payload int as a beat dict, its header unpacked too."""
    b = unpack(BEAT, v)
    b["hdr"] = unpack(Header, b["hdr"])
    return b


def fmt(v):
    """A port payload int, readable (for assertion messages)."""
    b = beat_dict(v)
    h = b["hdr"]
    return (f"[{getattr(h['kind'], 'name', h['kind'])} tile={h['tile']} xb={h['xbctx']} "
            f"addr={h['addr']:#x} len={h['length']} aes={h['aes']} cc={h['cc']} "
            f"ki={h['key_index']} tag={h['tag']} f={b['first']} l={b['last']} "
            f"data={b['data']:#x}]")


class _Idle:
    """Stands in for a stream driver a test does not use (its port is tied off)."""
    queue = ()
    received = 0

    def empty(self):
        return True


class SxpTB(TB):
    """The SXP under test: sources on ``xb_i`` and ``pcie_i``, sinks on ``pcie_o`` and ``xb_o``
    (*idle* / *stall*: probability of an idle or back-pressure cycle), both CSR ports and the
    monitor that feeds :class:`~sw.sxp.model.SxpModel` and checks the outputs (the module
    docstring). Without *read_path* the read direction is tied off."""

    def __init__(self, dut, idle=0.0, stall=0.0, read_path=True):
        super().__init__(dut)
        self.xb_i = StreamSource(dut, "xb_i", self.clk)
        self.pcie_o = StreamSink(dut, "pcie_o", self.clk)
        if read_path:
            self.pcie_i = StreamSource(dut, "pcie_i", self.clk)
            self.xb_o = StreamSink(dut, "xb_o", self.clk)
        else:   # fewer coroutines per cycle: pcie_i idle, xb_o always ready
            self.pcie_i, self.xb_o = _Idle(), _Idle()
            dut.pcie_i__valid.value = 0
            dut.pcie_i__payload.value = 0
            dut.xb_o__ready.value = 1
        self.set_pauses(idle, stall)
        self.model = SxpModel(CONTEXTS, LANES)
        self.exp_w, self.exp_r = [], []   # expected beats (ints) in order
        self.parked = []                  # expected parked-read beats, any position
        self.unreleased = [0] * CONTEXTS  # cc completions the model took, release not yet seen
        self._release = dut.parking._id("release", extended=False)   # {ctx, valid}
        self.errors = []
        self.outstanding = {}             # one-read monitor: phys -> True
        self.read_hook = None             # called with (beat dict) for each aes read on pcie_o
        self.host_busy = 0                # host-model answers still being sent (drain waits)
        self.csr = {port: CsrBus(dut, port, self.clk) for port in ("ccu", "host")}
        self.held = deque()               # xb_i requests waiting behind a full slot
        self._cur = {"xb_i": [], "pcie_i": []}
        self._out = {"pcie_o": None, "xb_o": None}
        self.cover = SxpCoverage(LANES, CONTEXTS)     # functional cover points (tb/sxp/cover.py)
        cocotb.start_soon(self._monitor())

    def set_pauses(self, idle, stall):
        for src in (self.xb_i, self.pcie_i):
            if not isinstance(src, _Idle):
                src.set_pause(random_pause(idle) if idle else never())
        for sink in (self.pcie_o, self.xb_o):
            if not isinstance(sink, _Idle):
                sink.set_pause(random_pause(stall) if stall else never())

    # ------------------------------------------------------------------ monitor
    async def _monitor(self):
        dut = self.dut
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            if int(dut.rst.value):
                self._cur = {"xb_i": [], "pcie_i": []}
                self._out = {"pcie_o": None, "xb_o": None}
                self.unreleased = [0] * CONTEXTS
                continue
            release = int(self._release.value)
            ctx = release >> 1
            if release & 1 and ctx < CONTEXTS:  # a request accepted from now on meets busy = 0
                if self.unreleased[ctx] <= 0:
                    self.errors.append(f"context {ctx} released without an aes cc "
                                       f"completion for it")
                self.unreleased[ctx] -= 1
            done = []
            for port in ("xb_i", "pcie_i"):
                if int(getattr(dut, f"{port}__valid").value) and int(getattr(dut, f"{port}__ready").value):
                    b = beat_dict(getattr(dut, f"{port}__payload").value)
                    self._cur[port].append(b)
                    if b["last"]:
                        done.append((port, self._cur[port]))
                        self._cur[port] = []
            for port, beats in done:
                hdr, data = beats[0]["hdr"], [b["data"] for b in beats]
                if port == "xb_i":
                    self.held.append((hdr, data))
                    self._requests()
                else:
                    before = len(self.model.exceptions)
                    out, released = self.model.completion(hdr, data)
                    self.cover.completion(self.model, hdr, released, before)
                    for p in out:
                        self.exp_r += [beat_int(b) for b in p.beats()]
                    for p in released:
                        self.parked += [beat_int(b) for b in p.beats()]
                    h = hdr
                    if h["kind"] == Kind.READ_CPL and h["aes"] and h["cc"]:
                        self.outstanding.pop(h["key_index"], None)
                        if h["key_index"] < CONTEXTS:
                            self.unreleased[h["key_index"]] += 1
                    self._requests()
            if int(dut.xb_o__valid.value) and int(dut.xb_o__ready.value):
                self._check_framing("xb_o", beat_dict(dut.xb_o__payload.value))
            if int(dut.pcie_o__valid.value) and int(dut.pcie_o__ready.value):
                b = beat_dict(dut.pcie_o__payload.value)
                self._check_framing("pcie_o", b)
                h = b["hdr"]
                if h["kind"] == Kind.READ_REQ and h["aes"]:
                    if self.outstanding.get(h["key_index"]):
                        self.errors.append(f"second read on context {h['key_index']} left while "
                                           f"one was outstanding: {fmt(beat_int(b))}")
                    self.outstanding[h["key_index"]] = True
                    if self.read_hook:
                        self.read_hook(b)

    def _requests(self):
        """Give the model the requests accepted on xb_i, in order, up to one that waits for
        a full holding slot: the SXP holds it (and what follows) in its pipeline until the
        context's cc completion has passed (head-of-line), so the model takes it then."""
        while self.held and not self.model.waits_for_slot(self.held[0][0], len(self.held[0][1])):
            hdr, data = self.held.popleft()
            before = len(self.model.exceptions)
            for p in self.model.request(hdr, data):
                beats = [beat_int(b) for b in p.beats()]
                h = p.hdr
                if h["kind"] == Kind.READ_REQ and h["aes"] and self.unreleased[h["key_index"]]:
                    self.parked += beats    # parks in the RTL if it beats the release there
                else:
                    self.exp_w += beats
            self.cover.request(self.model, hdr, before)

    def _check_framing(self, port, b):
        """An output packet: first beat flagged, header constant, length / (16·L) beats."""
        cur, h = self._out[port], b["hdr"]
        if bool(b["first"]) != (cur is None):
            self.errors.append(f"{port}: first={b['first']} on a beat "
                               f"{'outside' if cur is None else 'inside'} a packet "
                               f"(packets interleaved?): {fmt(beat_int(b))}")
        if cur is not None and cur[0] != h:
            self.errors.append(f"{port}: header changed inside a packet: {fmt(beat_int(b))}")
        hdr0, n = (h, 1) if cur is None else (cur[0], cur[1] + 1)
        if b["last"]:
            want = 1 if hdr0["kind"] == Kind.READ_REQ else hdr0["length"] // BB
            if n != want:
                self.errors.append(f"{port}: a packet of {n} beats left, its header says "
                                   f"{want}: last beat {fmt(beat_int(b))}")
            self._out[port] = None
        else:
            self._out[port] = (hdr0, n)

    # ------------------------------------------------------------------ CSR
    async def csr_write(self, port, addr, value):
        """Returns once the write shows on the outputs (the model takes it at once)."""
        self._model_csr_write(port, addr, value)
        await self.csr[port].write(addr, value)

    async def csr_writes(self, writes, port="ccu", both=False):
        """Play *writes* in order on *port*; with *both*, two per cycle (one on each port,
        distinct registers) where the order allows it."""
        writes = list(writes)
        if not both:
            for addr, value in writes:
                await self.csr_write(port, addr, value)
            return
        while writes:
            pair = [writes.pop(0)]
            if writes and writes[0][0] != pair[0][0]:
                pair.append(writes.pop(0))
            ops = []
            for p, (addr, value) in zip(("ccu", "host"), pair):
                self._model_csr_write(p, addr, value)
                ops.append((self.csr[p], self.csr[p].submit(True, addr, value)))
            for bus, op in ops:         # submitted in the same cycle: played in the same cycle
                await bus.wait(op)

    def _model_csr_write(self, port, addr, value):
        m = self.model
        trusted, denied, before = m.trusted, m.denied, len(m.exceptions)
        m.csr_write(port, addr, value)
        self.cover.csr_write(m, port, trusted, denied, before)

    async def csr_read(self, addr, port="ccu"):
        """Read *addr* on *port*; the model sees the read too (in trusted mode a host read
        counts in DENIED)."""
        v = await self.csr[port].read(addr)
        if port == "host":
            denied = self.model.denied
            self.model.csr_read(addr, port)
            self.cover.csr_read(self.model, port, denied)
        return v

    async def check_csr(self, addr, mask=0xFFFF_FFFF, port="ccu", what=""):
        want = self.model.csr_read(addr, port)
        got = await self.csr[port].read(addr)
        assert got & mask == want & mask, \
            f"{what or hex(addr)} ({port} port): RTL reads {got:#x}, model {want:#x} (mask {mask:#x})"

    def driver(self):
        bus = QueuedBus()
        return bus, SxpCsrDriver(bus)

    async def configure(self, cfg, keys=None, port="ccu"):
        bus, drv = self.driver()
        program(drv, cfg)
        for p, k in (keys or {}).items():
            drv.install_key(p, k)
        await self.csr_writes(bus.take(), port)
        await self.wait_keys()

    async def configure_keys(self, keys, port="ccu"):
        """Install ``keys`` ({phys: 32 bytes}): KEY_W0..7 and KEY_COMMIT per context, then wait
        until STATUS.key_busy clears."""
        bus, drv = self.driver()
        for p, k in keys.items():
            drv.install_key(p, k)
        await self.csr_writes(bus.take(), port)
        await self.wait_keys()

    async def wait_keys(self):
        for _ in range(100):
            if not (await self.csr_read(STATUS)) & 4:
                return
        raise AssertionError("STATUS.key_busy stuck")

    # ------------------------------------------------------------------ traffic
    def send(self, src, pkt):
        for b in pkt.beats():
            src.send(beat_int(b))

    def request(self, pkt):
        self.send(self.xb_i, pkt)

    def completion(self, pkt):
        self.send(self.pcie_i, pkt)

    async def drain(self, timeout=200_000):
        for _ in range(timeout):
            if self.xb_i.empty() and self.pcie_i.empty() and not self.host_busy and \
                    self.pcie_o.received >= len(self.exp_w) + len(self.parked) and \
                    self.xb_o.received >= len(self.exp_r):
                break
            await RisingEdge(self.clk)
        for _ in range(60):        # anything extra would show up here
            await RisingEdge(self.clk)
        self.compare()

    def compare(self):
        assert not self.errors, f"{len(self.errors)} errors, first: " + "; ".join(self.errors[:3])
        assert not self.held, f"{len(self.held)} requests still wait behind a full holding slot"
        got_w = list(self.pcie_o.queue)
        for v in self.parked:
            if v not in got_w:
                raise AssertionError(f"pcie_o: parked read {fmt(v)} never left")
            got_w.remove(v)
        for name, got, want in (("pcie_o", got_w, self.exp_w), ("xb_o", list(self.xb_o.queue),
                                                                   self.exp_r)):
            for k, (g, w) in enumerate(zip(got, want)):
                if g != w:
                    raise AssertionError(f"{name} beat {k}: RTL {fmt(g)} != model {fmt(w)}"
                                         f"{self._why(g)}")
            if len(got) != len(want):
                extra = got[len(want):len(want) + 2] or want[len(got):len(got) + 2]
                raise AssertionError(f"{name}: RTL sent {len(got)} beats, model {len(want)}; "
                                     f"first difference {[fmt(v) for v in extra]}")

    def _why(self, v):
        """What the model did with the packet an unexpected RTL beat belongs to."""
        h = beat_dict(v)["hdr"]
        raised = [e.cause.name for e in self.model.exceptions
                  if (e.tile, e.addr, e.kind) == (h["tile"], h["addr"], int(h["kind"].value))]
        return (f"; the model raised {'/'.join(raised)} for that packet (its check let it "
                f"through in the RTL?)" if raised else "")

    async def check_status(self):
        await self.check_csr(EXC_COUNT, what="EXC_COUNT")
        await self.check_csr(DENIED, what="DENIED")
        await self.check_csr(RD_BUSY, what="RD_BUSY")
        got = await self.csr_read(STATUS)
        assert got & 3 == self.model.csr_read(STATUS) & 3, f"STATUS {got:#x} vs model"
        if self.model.exceptions:
            rec = (Cause((got >> 4) & 15), await self.csr_read(EXC_TILE),
                   await self.csr_read(EXC_ADDR))
            recs = [(e.cause, e.tile | e.kind << 16, e.addr) for e in self.model.exceptions]
            assert rec in recs, f"latched exception {rec} is none of the model's {recs[:4]}"
        assert int(self.dut.irq.value) == int(self.model.exc), \
            f"irq {int(self.dut.irq.value)} but the model's STATUS.exc is {int(self.model.exc)}"

    async def reset(self, cycles=2):
        """Reset the SXP and forget everything before it: the sinks may record a transfer
        in the reset cycle itself (valid from before the reset, which the monitor ignores)."""
        await super().reset(cycles)
        self.cover.reset(self.model.trusted)
        self.model.reset()
        for sink in (self.pcie_o, self.xb_o):
            if not isinstance(sink, _Idle):
                sink.queue.clear()
                sink.received = 0
        for pending in (self.exp_w, self.exp_r, self.parked, self.held, self.errors):
            pending.clear()
        self.outstanding.clear()
        self.unreleased = [0] * CONTEXTS


# ---------------------------------------------------------------------- packet builders
def frame_packets(blocks, rng, *, tile, xbctx, addr, kind=Kind.WRITE_REQ, key_index=0,
                  max_bytes=256, tag=0):
    """Split a frame (list of blocks) into aes packets of random whole-beat sizes (beats of
    LANES blocks); cc on the last."""
    out, a, k = [], addr, 0
    for size in split_sizes(16 * len(blocks), rng, max_bytes, step=BB):
        n = size // 16
        last = k + n == len(blocks)
        out.append(Packet(header(kind=kind, tile=tile, xbctx=xbctx, addr=a, length=size, aes=1,
                                 cc=int(last), key_index=key_index, tag=tag),
                          beats_of(blocks[k:k + n], LANES)))
        a, k = a + size, k + n
    return out


def blocks_out(values):
    """The 16-byte blocks of output beats (payload ints), in order."""
    return blocks_of_beats([beat_dict(v)["data"] for v in values], LANES)


def small_frame(rng):
    """The smallest frame at LANES (two beats: IV beat and tag beat), as blocks."""
    return write_frame(rng.randbytes(12), rng.randbytes(2 * BB - 32))


def rand_addr(rng, region, length):
    base, limit = region
    return base + BB * rng.randrange((limit - base - length) // BB + 1)


def rand_beats(rng, n):
    """*n* beats of random data (payload ``data`` fields)."""
    return [rng.getrandbits(BLOCK_BITS * LANES) for _ in range(n)]


async def settle(tb, cycles=100):
    """Let anything in flight through the pipeline (longer than its latency, which is not
    assumed here; a test that needs the outputs complete uses ``drain``)."""
    for _ in range(cycles):
        await RisingEdge(tb.clk)


async def wait_trusted(tb, port="ccu", timeout=50):
    """Poll STATUS.trusted: entering trusted mode may take effect some cycles after the
    CTRL.trust write (the consistency check is pipelined). True once it is set."""
    for _ in range(timeout):
        if (await tb.csr_read(STATUS, port)) & 2:
            return True
    return False


async def setup(dut, idle=0.0, stall=0.0):
    """An :class:`SxpTB` after reset, with a random legal configuration and a random key per
    physical context: ``(tb, rng, cfg, keys)``."""
    tb = SxpTB(dut, idle, stall)
    await tb.reset()
    rng = random.Random(random.getrandbits(32))
    cfg = random_config(rng, CONTEXTS, align=BB)
    keys = {p: rng.randbytes(32) for p in range(CONTEXTS)}
    await tb.configure(cfg, keys)
    return tb, rng, cfg, keys


# ---------------------------------------------------------------------- checks and traffic
def misaligned_packets(rng, cfg, n):
    """Requests whose address or length is not a multiple of 16·L (MALFORMED), in region 0
    and in key regions, writes and reads."""
    out = []
    for _ in range(n):
        phys = rng.randrange(CONTEXTS)
        aes = rng.randrange(2)
        region = cfg.region_of_phys(phys) if aes else cfg.regions[0]
        beats = rng.randint(1, 256 // BB)
        addr, length = rand_addr(rng, region, BB * (beats + 1)), BB * beats
        steps = [8] + ([16] if LANES > 1 else [])
        if rng.randrange(2):
            addr += rng.choice(steps)
        else:
            length -= rng.choice(steps)
        kind = rng.choice([Kind.WRITE_REQ, Kind.READ_REQ])
        out.append(Packet(header(kind=kind, tile=rng.randrange(1472),
                                 xbctx=cfg.xbctx_of(phys)[0], addr=addr, length=length, aes=aes),
                          rand_beats(rng, beats) if kind == Kind.WRITE_REQ else [0]))
    return out


async def expect_exception(tb, cause, tile, addr, what):
    """The latched record is (cause, tile, addr); irq is up; the CCU clears it."""
    try:
        await tb.drain()
    except AssertionError as e:
        raise AssertionError(f"{what} ({cause.name}): {e}") from None
    st = await tb.csr_read(STATUS)
    got = (Cause((st >> 4) & 15), (await tb.csr_read(EXC_TILE)) & 0x7FF, await tb.csr_read(EXC_ADDR))
    assert st & 1 and int(tb.dut.irq.value), f"{what}: no exception latched (STATUS {st:#x})"
    assert got == (cause, tile, addr), f"{what}: latched {got}, expected {(cause, tile, addr)}"
    assert tb.model.record.cause is cause, f"{what}: model disagrees: {tb.model.record}"
    await tb.csr_write("ccu", STATUS, 1)
    await RisingEdge(tb.clk)
    assert not int(tb.dut.irq.value), f"{what}: irq still high after the CCU cleared it"
    await tb.check_status()


def request_cases(rng, cfg, xb, base, limit):
    """(what, cause, packet) of requests that fail their check: every request cause, with
    misaligned addresses and lengths (at 16 bytes, and at 16·L when L > 1)."""
    b0, l0 = cfg.regions[0]
    W = dict(tile=77, xbctx=xb, aes=1)
    R = dict(W, kind=Kind.READ_REQ)
    cases = [
        ("write past the region's limit", Cause.REGION,
         Packet(header(**W, addr=limit - BB, length=2 * BB), rand_beats(rng, 2))),
        ("write below the region's base", Cause.REGION,
         Packet(header(**W, addr=base - BB, length=2 * BB), rand_beats(rng, 2))),
        ("read past the limit", Cause.REGION, Packet(header(**R, addr=limit - 4 * BB, length=8 * BB))),
        ("clear write across region 0's limit", Cause.CLEAR,
         Packet(header(tile=77, xbctx=xb, addr=l0 - BB, length=2 * BB), [5, 6])),
        ("clear read below region 0", Cause.CLEAR,
         Packet(header(tile=77, kind=Kind.READ_REQ, addr=b0 - BB, length=4 * BB))),
        ("length not a multiple of 16", Cause.MALFORMED, Packet(header(**W, addr=base, length=BB + 8), [1, 2])),
        ("write address not a multiple of 16", Cause.MALFORMED, Packet(header(**W, addr=base + 8, length=BB), [1])),
        ("read address not a multiple of 16", Cause.MALFORMED, Packet(header(**R, addr=base + 8, length=2 * BB))),
        ("write payload over 256 bytes", Cause.MALFORMED,
         Packet(header(**W, addr=base, length=256 + BB), [0] * (256 // BB + 1))),
        ("read over 1 KiB", Cause.MALFORMED, Packet(header(**R, addr=base, length=1024 + BB))),
        ("completion kind on xb_i", Cause.MALFORMED,
         Packet(header(**W, kind=Kind.READ_CPL, addr=base, length=BB), [1])),
        ("one-beat frame", Cause.MALFORMED, Packet(header(**W, addr=base, length=BB, cc=1), [1])),
    ]
    if LANES > 1:
        cases += [
            ("write length not a multiple of 16·L", Cause.MALFORMED,
             Packet(header(**W, addr=base, length=BB + 16), [1, 2])),
            ("write address not a multiple of 16·L", Cause.MALFORMED,
             Packet(header(**W, addr=base + 16, length=BB), [1])),
            ("read address not a multiple of 16·L", Cause.MALFORMED,
             Packet(header(**R, addr=base + BB - 16, length=2 * BB))),
            ("clear write address not a multiple of 16·L", Cause.MALFORMED,
             Packet(header(tile=77, xbctx=xb, addr=b0 + 16, length=BB), [3])),
        ]
    return cases


def full_rate_traffic(tb, rng, cfg, keys, frames, size=MAX_FRAME_BYTES):
    """*frames* write frames on xb_i and as many sealed read frames on pcie_i, in packets of
    256 bytes, frame f of both directions on physical context f mod CONTEXTS (so each
    context carries a write frame and a read frame at the same time). Returns the beats
    queued per direction."""
    per = 256 // 16                         # blocks per packet
    w = r = 0
    for f in range(frames):
        phys = f % CONTEXTS
        base = cfg.region_of_phys(phys)[0] + size * (f // CONTEXTS % 4)   # regions >= 4 KiB
        wb = write_frame(rng.randbytes(12), rng.randbytes(size - 32))
        rb = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(size - 32))
        for k in range(0, len(wb), per):
            last = int(k + per >= len(wb))
            tb.request(Packet(header(tile=f, xbctx=cfg.xbctx_of(phys)[0], addr=base + 16 * k,
                                     length=16 * per, aes=1, cc=last),
                              beats_of(wb[k:k + per], LANES)))
            tb.completion(Packet(header(kind=Kind.READ_CPL, tile=f, addr=16 * k, length=16 * per,
                                        aes=1, cc=last, key_index=phys),
                                 beats_of(rb[k:k + per], LANES)))
            w += per // LANES
            r += per // LANES
    return w, r


async def transfer_cycles(tb, w_beats, r_beats, limit=100_000):
    """Per output port, the cycle numbers (from now) of its transfers until *w_beats* left
    on pcie_o and *r_beats* on xb_o."""
    dut, cycle = tb.dut, 0
    seen = {"pcie_o": [], "xb_o": []}
    while tb.pcie_o.received < w_beats or tb.xb_o.received < r_beats:
        await RisingEdge(tb.clk)
        await ReadOnly()
        cycle += 1
        for port in seen:
            if int(getattr(dut, f"{port}__valid").value) and int(getattr(dut, f"{port}__ready").value):
                seen[port].append(cycle)
        if cycle > limit:
            raise AssertionError(f"stalled: {tb.pcie_o.received}/{w_beats} beats on pcie_o, "
                                 f"{tb.xb_o.received}/{r_beats} on xb_o")
    await RisingEdge(tb.clk)
    return seen
