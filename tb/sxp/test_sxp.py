"""cocotb regression of the Secure Exchange Pipe (hw/sxp) against the golden model
(sw/sxp/model.py) and OpenSSL (``cryptography``'s AESGCM), at ``lanes`` 1 (design ``sxp``)
and 4 (``sxp_x4``): a beat carries 16·L bytes, every address and length is a multiple of it.

The testbench (:class:`~tb.sxp.env.SxpTB`: drivers, monitor, scoreboard against the model),
the packet builders and the shared checks are in tb/sxp/env.py. Nothing here assumes a
latency: tests wait for the outputs (``drain``) or for a register to change (``wait_trusted``).
"""
import os
import random

import cocotb
import pytest
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gcm import GcmCore
from hw.sxp.packet import Kind
from hw.sxp.regs import (
    ADDR_KEY,
    ADDR_KEY_COMMIT,
    ADDR_KPHYSMAP,
    ADDR_KSEL_BASE,
    ADDR_KSEL_LIMIT,
    ADDR_KXBCTXMAP,
    KEY_WORDS,
    Cause,
    register_map,
)
from sw.sxp.config import program, random_config
from sw.sxp.frames import (
    FRAME_SIZES,
    FRAMING_CASES,
    IV_BEAT,
    beats_of,
    blocks_of_beats,
    bytes_of,
    framing_case,
    open_frame,
    sealed_frame,
    write_frame,
)
from sw.sxp.model import Packet, header
from tb.common.scrub import (
    Refusals,
    Scanner,
    bytes_secret,
    gcm_frame_secrets,
    gcm_key_secrets,
)
from tb.common.stream import interleave
from tb.sxp.env import (
    BB,
    CONTEXTS,
    CTRL,
    DENIED,
    LANE_MASK,
    LANES,
    RD_BUSY,
    STATUS,
    SxpTB,
    beat_dict,
    blocks_out,
    expect_exception,
    frame_packets,
    full_rate_traffic,
    misaligned_packets,
    rand_addr,
    rand_beats,
    request_cases,
    settle,
    setup,
    small_frame,
    transfer_cycles,
    wait_trusted,
)


@cocotb.test()
async def openssl_round_trips(dut):
    """Every frame size: frames written through the SXP open in OpenSSL; frames sealed by
    OpenSSL pass the read path with the plaintext and their tag. Every other size the read
    frame is on the write frame's physical context: a context's write frame and read frame
    open at the same time are independent (one engine per direction)."""
    tb, rng, cfg, keys = await setup(dut, 0.2, 0.2)
    sent, read = [], []
    for k, size in enumerate(FRAME_SIZES):
        phys = rng.randrange(CONTEXTS)
        nonce, pt = rng.randbytes(12), rng.randbytes(size - 32)
        region = cfg.region_of_phys(phys)
        wp = frame_packets(write_frame(nonce, pt), rng, tile=rng.randrange(1472),
                           xbctx=cfg.xbctx_of(phys)[0], addr=rand_addr(rng, region, size))
        sent.append((phys, pt))
        rphys = phys if k % 2 == 0 else rng.randrange(CONTEXTS)
        rpt = rng.randbytes(size - 32)
        frame = sealed_frame(keys[rphys], rng.randbytes(12), rpt)
        rp = frame_packets(frame, rng, tile=3, xbctx=0, addr=0x4000, kind=Kind.READ_CPL,
                           key_index=rphys)
        read.append((rpt, frame[-1]))
        # both frames open on the context before either closes
        tb.request(wp[0])
        tb.completion(rp[0])
        for p in wp[1:]:
            tb.request(p)
        for p in rp[1:]:
            tb.completion(p)
    await tb.drain()
    frames, cur = [], []
    for v in tb.pcie_o.queue:
        b = beat_dict(v)
        cur.append(v)
        if b["last"] and b["hdr"]["cc"]:
            frames.append((b["hdr"]["key_index"], blocks_out(cur)))
            cur = []
    assert len(frames) == len(sent)
    for (ki, blocks), (phys, pt) in zip(frames, sent):
        assert ki == phys, f"key_index {ki}, expected {phys}"
        assert open_frame(keys[phys], blocks) == pt, "OpenSSL opened a different plaintext"
    got = blocks_out(tb.xb_o.queue)
    pos = 0
    for rpt, tag in read:           # each frame: IV, plaintext, tag
        n = len(rpt) // 16 + 2
        assert bytes_of(got[pos + 1:pos + n - 1]) == rpt, \
            "the read path did not return OpenSSL's plaintext"
        assert got[pos + n - 1] == tag, "a verified frame's tag slot does not carry the tag"
        pos += n
    assert not tb.model.exceptions, f"exceptions {tb.model.exceptions[:3]}"
    await tb.check_status()


@cocotb.test()
@cocotb.parametrize((("idle", "stall"), [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]))
async def random_traffic(dut, idle, stall, frames=60):
    """Random traffic on every stream, swept over full speed, idle with back-pressure and
    heavy back-pressure (idle / stall probabilities on the sources / sinks)."""
    tb, rng, cfg, keys = await setup(dut, idle, stall)
    # writes and reads each on a random half of the contexts: some carry both directions
    wctx = rng.sample(range(CONTEXTS), max(1, CONTEXTS // 2))
    rctx = rng.sample(range(CONTEXTS), max(1, CONTEXTS // 2))
    max_beats = 256 // BB
    lists = []
    # write frames: per context in sequence, contexts interleaved at packet granularity
    for phys in wctx:
        pk = []
        for _ in range(max(1, frames // len(wctx) // 2)):
            size = rng.choice(FRAME_SIZES)
            pk += frame_packets(write_frame(rng.randbytes(12), rng.randbytes(size - 32)), rng,
                                tile=rng.randrange(1472), xbctx=rng.choice(cfg.xbctx_of(phys)),
                                addr=rand_addr(rng, cfg.region_of_phys(phys), size))
        lists.append(pk)
    # aes reads (several per context: later ones park), clear writes and reads, bad packets
    reads = []
    for _ in range(frames // 2):
        phys = rng.choice(rctx)
        size = rng.choice(FRAME_SIZES)
        reads.append(Packet(header(kind=Kind.READ_REQ, tile=rng.randrange(1472),
                                   xbctx=rng.choice(cfg.xbctx_of(phys)),
                                   addr=rand_addr(rng, cfg.region_of_phys(phys), size),
                                   length=size, aes=1, tag=rng.randrange(256))))
    lists.append(reads)
    misc = []
    for _ in range(frames // 3):
        n = rng.randint(1, max_beats)
        kind = rng.choice([Kind.WRITE_REQ, Kind.READ_REQ])
        length = BB * n if kind == Kind.WRITE_REQ else BB * rng.randint(1, 1024 // BB)
        misc.append(Packet(header(kind=kind, tile=rng.randrange(1472), xbctx=rng.randrange(16),
                                  addr=rand_addr(rng, cfg.regions[0], length), length=length,
                                  key_index=rng.randrange(16)),
                           rand_beats(rng, n) if kind == Kind.WRITE_REQ else [0]))
    for _ in range(frames // 10):   # dropped whole: outside the region
        phys = rng.choice(wctx)
        _, limit = cfg.region_of_phys(phys)
        misc.append(Packet(header(tile=rng.randrange(1472), xbctx=cfg.xbctx_of(phys)[0],
                                  addr=limit - BB, length=2 * BB, aes=1), rand_beats(rng, 2)))
    misc += misaligned_packets(rng, cfg, max(1, frames // 10))
    for _ in range(max(1, frames // 15)):   # clear, beat count != length / (16·L): MALFORMED
        n = rng.randint(1, max_beats)
        m = rng.choice([k for k in range(1, max_beats + 2) if k != n])
        misc.append(Packet(header(tile=rng.randrange(1472), xbctx=rng.randrange(16),
                                  addr=rand_addr(rng, cfg.regions[0], BB * n), length=BB * n),
                           rand_beats(rng, m)))
    lists.append(misc)
    for p in interleave(lists, rng):
        tb.request(p)

    # the host: answers each aes read with a sealed frame (1 in 8 forged), completions of
    # different reads interleaved at packet granularity
    async def answer(b):
        tb.host_busy += 1
        try:
            await answer_read(b)
        finally:
            tb.host_busy -= 1

    async def answer_read(b):
        h = b["hdr"]
        await RisingEdge(tb.clk)
        for _ in range(rng.randint(0, 40)):
            await RisingEdge(tb.clk)
        pt = rng.randbytes(h["length"] - 32)
        frame = sealed_frame(keys[h["key_index"]], rng.randbytes(12), pt)
        if rng.random() < 0.125:
            frame[-1] ^= 1 << rng.randrange(128)
        for p in frame_packets(frame, rng, tile=h["tile"], xbctx=0, addr=h["addr"],
                               kind=Kind.READ_CPL, key_index=h["key_index"],
                               max_bytes=max(64, BB), tag=h["tag"]):
            tb.completion(p)
            for _ in range(rng.randint(0, 6)):
                await RisingEdge(tb.clk)
    tb.read_hook = lambda b: cocotb.start_soon(answer(b))
    # clear completions from the host too (a few with a beat count that is not
    # length / (16·L), a few misaligned)
    for k in range(frames // 4):
        n = rng.randint(1, max_beats)
        m = n if k % 5 else rng.choice([j for j in range(1, max_beats + 2) if j != n])
        addr = BB * rng.getrandbits(24) + (8 if k % 7 == 3 else 0)
        tb.completion(Packet(header(kind=Kind.READ_CPL, tile=rng.randrange(1472), addr=addr,
                                    length=BB * n, cc=rng.randrange(2), tag=rng.randrange(256)),
                             rand_beats(rng, m)))
    await tb.drain()
    assert tb.model.exceptions, "control: the bad packets raised no exception"
    await tb.check_status()


@cocotb.test()
async def random_configurations(dut):
    """Random legal configurations (1,000 at lanes 1, fewer at more lanes: the wider model
    is slower per cycle), each programmed over both CSR ports and probed with a one-packet
    frame inside its region, two-beat frames at both region ends and one beat past them
    (dropped, REGION) and cleartext writes at and across region 0's ends, against the model.
    A quarter of the configurations put the highest region's limit at 2**32 - 16·L (probed
    there when it is a key region), where one beat past the limit ends at 2**32."""
    tb = SxpTB(dut, 0.1, 0.1, read_path=False)    # requests only: fewer coroutines per cycle
    await tb.reset()
    rng = random.Random(random.getrandbits(32))
    cfg = random_config(rng, CONTEXTS, align=BB)
    keys = {p: rng.randbytes(32) for p in range(CONTEXTS)}
    await tb.configure(cfg, keys)
    configs = int(os.environ.get("SXP_CONFIGS", 1000 // LANES))
    top = (1 << 32) - BB
    for _n in range(configs):
        # one in four: the highest region ends at 2**32 - 16·L, so the probe one beat past
        # its limit ends at 2**32 (outside, with the 33-bit end)
        new = random_config(rng, CONTEXTS, align=BB, top=rng.random() < 0.25)
        bus, drv = tb.driver()
        program(drv, new)
        await tb.csr_writes(bus.take(), both=True)
        cfg = new
        at_top = [p for p in range(CONTEXTS) if cfg.region_of_phys(p)[1] == top and cfg.xbctx_of(p)]
        phys = at_top[0] if at_top else rng.randrange(CONTEXTS)
        xb = rng.choice(cfg.xbctx_of(phys))
        base, limit = cfg.region_of_phys(phys)
        tile = rng.randrange(1472)
        frame = beats_of(write_frame(rng.randbytes(12), rng.randbytes(96)), LANES)
        tb.request(Packet(header(tile=tile, xbctx=xb, addr=rand_addr(rng, (base, limit), 128),
                                 length=128, aes=1, cc=1), frame))
        # two-beat frames (IV beat + tag beat) at the edges: inside passes, a beat over is dropped
        small = beats_of(small_frame(rng), LANES)
        for addr in (base, limit - 2 * BB, base - BB, limit - BB):
            tb.request(Packet(header(tile=tile, xbctx=xb, addr=addr & 0xFFFF_FFFF, length=2 * BB,
                                     aes=1, cc=1), small))
        b0, l0 = cfg.regions[0]
        for addr, beats in ((b0, 1), (l0 - BB, 1), (l0 - BB, 2), (b0 - BB, 1)):
            tb.request(Packet(header(tile=tile, xbctx=xb, addr=addr & 0xFFFF_FFFF,
                                     length=BB * beats), rand_beats(rng, beats)))
        await tb.xb_i.wait_idle()
        for _ in range(3):          # the last beat is checked before the next configuration
            await RisingEdge(tb.clk)
    await tb.drain()
    causes = {e.cause for e in tb.model.exceptions}
    assert causes == {Cause.REGION, Cause.CLEAR}, f"probes raised {causes}"
    await tb.check_status()


@cocotb.test()
async def every_exception_cause(dut):
    """Each cause in turn, misaligned packets among them, a good frame after each (traffic
    continues), then CONFIG."""
    tb, rng, cfg, keys = await setup(dut, 0.2, 0.2)
    phys = 1 % CONTEXTS
    xb = cfg.xbctx_of(phys)[0]
    base, limit = cfg.region_of_phys(phys)

    def good():
        for p in frame_packets(write_frame(rng.randbytes(12), rng.randbytes(96)), rng, tile=9,
                               xbctx=xb, addr=base):
            tb.request(p)
    for what, cause, pkt in request_cases(rng, cfg, xb, base, limit):
        tb.request(pkt)
        good()
        await expect_exception(tb, cause, 77, pkt.hdr["addr"], what)
    # completions: malformed (kind, misaligned), AUTH (forged tag), FRAME (bad IV tail; no key)
    C = dict(kind=Kind.READ_CPL, tile=12, aes=1, key_index=phys)
    bad_cpl = [("request kind on pcie_i", dict(C, kind=Kind.WRITE_REQ, addr=0x40 * BB, length=BB)),
               ("completion address not a multiple of 16", dict(C, addr=0x40 * BB + 8, length=BB)),
               ("completion length not a multiple of 16", dict(C, addr=0x40 * BB, length=BB + 8)),
               ("one-beat cc completion opening a frame", dict(C, addr=0x40 * BB, length=BB, cc=1))]
    if LANES > 1:
        bad_cpl += [("completion address not a multiple of 16·L", dict(C, addr=0x40 * BB + 16, length=BB)),
                    ("clear completion length not a multiple of 16·L", dict(C, aes=0, addr=0, length=BB + 16))]
    for what, h in bad_cpl:
        tb.completion(Packet(header(**h), rand_beats(rng, max(1, h["length"] // BB))))
        await expect_exception(tb, Cause.MALFORMED, 12, h["addr"], what)
    frame = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(96))
    frame[-1] ^= 1 << 77
    pk = frame_packets(frame, rng, tile=33, xbctx=0, addr=0x8000, kind=Kind.READ_CPL, key_index=phys)
    for p in pk:
        tb.completion(p)
    await expect_exception(tb, Cause.AUTH, 33, pk[-1].hdr["addr"], "forged tag")
    assert beat_dict(tb.xb_o.queue[-1])["data"] == 0, "the failed frame's tag-slot beat was not zeroed"
    frame = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(96))
    frame[0] ^= 1 << 120          # IV tail byte 15
    tb.completion(Packet(header(kind=Kind.READ_CPL, tile=34, addr=0x9000, length=128, aes=1,
                                cc=1, key_index=phys), beats_of(frame, LANES)))
    await expect_exception(tb, Cause.FRAME, 34, 0x9000, "IV tail not 00000001")
    assert blocks_out(list(tb.xb_o.queue)[-8 // LANES:]) == [0] * 8, "a refused frame leaked data"
    # MAP: a physical context without a region
    await tb.csr_write("ccu", ADDR_KPHYSMAP + 4 * phys, 0)
    tb.request(Packet(header(tile=77, xbctx=xb, aes=1, addr=base, length=2 * BB), [1, 2]))
    await expect_exception(tb, Cause.MAP, 77, base, "unmapped physical context")
    tb.request(Packet(header(tile=78, kind=Kind.READ_REQ, xbctx=xb, aes=1, addr=base, length=4 * BB)))
    await expect_exception(tb, Cause.MAP, 78, base, "read on an unmapped physical context")
    if CONTEXTS < 16:
        await tb.csr_write("ccu", ADDR_KXBCTXMAP + 4 * xb, 15)
        tb.request(Packet(header(tile=77, xbctx=xb, aes=1, addr=base, length=2 * BB), [1, 2]))
        await expect_exception(tb, Cause.MAP, 77, base, "xbctx mapped beyond the contexts")
        await tb.csr_write("ccu", ADDR_KXBCTXMAP + 4 * xb, phys)
    # CONFIG: trusted mode with KPHYSMAP not 1:1 (the zero entry), then with overlapping regions
    await tb.csr_write("ccu", CTRL, 1)
    await expect_exception(tb, Cause.CONFIG, 0, 0, "KPHYSMAP not 1:1")
    await tb.csr_write("ccu", ADDR_KPHYSMAP + 4 * phys, cfg.kp[phys])
    b0, l0 = cfg.regions[0]
    r = cfg.kp[phys]                # region r now overlaps region 0 by one byte
    await tb.csr_write("ccu", ADDR_KSEL_BASE + 4 * r, l0 - 1)
    await tb.csr_write("ccu", ADDR_KSEL_LIMIT + 4 * r, l0)
    await tb.csr_write("ccu", CTRL, 1)
    await expect_exception(tb, Cause.CONFIG, 0, 0, "overlapping regions")
    assert not (await tb.csr_read(STATUS)) & 2, "trusted mode entered with a bad configuration"
    # FRAME: no key after reset
    await tb.reset()
    await tb.configure(cfg)
    tb.request(Packet(header(tile=77, xbctx=xb, aes=1, addr=base, length=2 * BB, cc=1),
                      beats_of(small_frame(rng), LANES)))
    await expect_exception(tb, Cause.FRAME, 77, base, "context without a key")


@cocotb.test()
async def malformed_framing(dut):
    """Packets whose beat count is not hdr.length / (16·L), on xb_i and pcie_i, aes and
    clear: MALFORMED with the packet's tile/address latched; exactly length / (16·L) beats
    leave; from the beat at which the error shows they are zero (extra beats never leave);
    the frame the packet belonged to never verifies; a good frame on the same context
    afterwards does (OpenSSL)."""
    tb, rng, cfg, keys = await setup(dut, 0.2, 0.2)
    wp, rp = 1 % CONTEXTS, 2 % CONTEXTS
    for rd in (False, True):
        for tile, case in enumerate(FRAMING_CASES, 60 + 10 * rd):
            await _framing_case(tb, rng, cfg, keys, rd, case, rp if rd else wp, tile)
    await tb.check_status()


@cocotb.test()
async def malformed_framing_on_every_context(dut):
    """The framing errors of malformed_framing on encrypted packets on every physical context,
    in both directions (the cases taken in turn; the clear ones touch no context): each
    context's frame state ends with the bad packet and a good frame on it afterwards
    verifies."""
    tb, rng, cfg, keys = await setup(dut)
    cases = [c for c in FRAMING_CASES if not c.startswith("clear")]
    for phys in range(CONTEXTS):
        for rd in (False, True):
            case = cases[(2 * phys + rd) % len(cases)]
            await _framing_case(tb, rng, cfg, keys, rd, case, phys, 200 + 2 * phys + rd)
    await tb.check_status()


async def _framing_case(tb, rng, cfg, keys, rd, case, phys, tile):
    """One malformed-framing *case* on physical context *phys*, a write (xb_i) or a read
    completion (pcie_i, *rd*), then a good frame on the same context (malformed_framing)."""
    what = f"{'completion' if rd else 'write'} on context {phys}: {case}"
    out = tb.xb_o if rd else tb.pcie_o
    xb = cfg.xbctx_of(phys)[0]
    if rd:
        blocks = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(224))
        addr = 0x400
    else:
        blocks = write_frame(rng.randbytes(12), rng.randbytes(224))
        addr = cfg.region_of_phys(phys)[0]
    packets, want = framing_case(case, beats_of(blocks, LANES), LANES, rng)
    mark = len(out.queue)
    first = None
    for n, data, aes, cc in packets:
        a = addr if aes or rd else cfg.regions[0][0]
        h = header(kind=Kind.READ_CPL, key_index=phys) if rd else header(xbctx=xb)
        h.update(tile=tile, addr=a, length=n * BB, aes=aes, cc=cc)
        (tb.completion if rd else tb.request)(Packet(h, data))
        first = first or h
        addr += n * BB
    await expect_exception(tb, Cause.MALFORMED, tile, first["addr"], what)
    got = [beat_dict(v)["data"] for v in list(out.queue)[mark:]]
    assert len(got) == len(want), f"{what}: {len(got)} beats left, expected {len(want)}"
    if want[0] is IV_BEAT:
        assert got[0] & LANE_MASK == blocks[0], f"{what}: the IV left changed"
        want[0] = None
    for k, (g, w) in enumerate(zip(got, want)):
        assert w is None or g == w, f"{what}: beat {k} left as {g:#x}, expected {w:#x}"
    # a good frame on the same context afterwards (the frame state is consistent)
    mark = len(out.queue)
    pt = rng.randbytes(224)
    if rd:
        good = sealed_frame(keys[phys], rng.randbytes(12), pt)
        for p in frame_packets(good, rng, tile=7, xbctx=0, addr=0x400, kind=Kind.READ_CPL, key_index=phys):
            tb.completion(p)
    else:
        for p in frame_packets(write_frame(rng.randbytes(12), pt), rng, tile=7, xbctx=xb,
                               addr=cfg.region_of_phys(phys)[0]):
            tb.request(p)
    await tb.drain()
    blocks = blocks_out(list(out.queue)[mark:])
    if rd:
        assert bytes_of(blocks[1:-1]) == pt and blocks[-1] == good[-1], \
            f"after '{what}' a good completion frame did not decrypt and verify"
    else:
        assert open_frame(keys[phys], blocks) == pt, f"after '{what}' a good write frame did not open in OpenSSL"
    assert not (await tb.csr_read(STATUS)) & 1, f"after '{what}' the good frame raised {tb.model.exceptions[-1]}"


@cocotb.test()
async def trusted_mode_locks_the_host(dut):
    tb, rng, cfg, keys = await setup(dut)
    await tb.csr_write("host", CTRL, 1)            # the host may enable it ...
    # ... and from that write on its writes are refused, even before STATUS.trusted shows
    await tb.csr_write("host", ADDR_KXBCTXMAP + 4 * 5, (cfg.kx[5] + 1) % CONTEXTS)
    assert await wait_trusted(tb), "trusted mode not entered with a good configuration"
    writes = [(ADDR_KXBCTXMAP, 3), (ADDR_KPHYSMAP, 9), (ADDR_KSEL_BASE + 8, 0), (ADDR_KSEL_LIMIT, 5),
              (ADDR_KEY, 0x1234), (ADDR_KEY_COMMIT, 0), (STATUS, 1), (CTRL, 1)]
    for addr, value in writes:                      # ... nothing after that either
        await tb.csr_write("host", addr, value)
    await tb.check_csr(DENIED, what="DENIED after refused host writes")
    assert (await tb.csr_read(DENIED)) == len(writes) + 1
    for addr in (ADDR_KXBCTXMAP, ADDR_KXBCTXMAP + 4 * 5, ADDR_KPHYSMAP, ADDR_KSEL_BASE + 8,
                 ADDR_KSEL_LIMIT):
        await tb.check_csr(addr, what=f"config at {addr:#x} after refused host writes")
    # ... and it reads nothing: configuration, exception record, counters, mode all read as
    # zero on the host port while the CCU port reads them; every refused read counts
    assert cfg.regions[16][0], "control: KSEL_BASE16 is non-zero"
    before = await tb.csr_read(DENIED)
    hidden = list(register_map(CONTEXTS))
    for reg in hidden:
        got = await tb.csr_read(reg.addr, "host")
        assert got == 0, f"host read of {reg.name} in trusted mode returned {got:#x}"
    assert (await tb.csr_read(ADDR_KSEL_BASE + 4 * 16)) == cfg.regions[16][0], "CCU read changed"
    assert (await tb.csr_read(STATUS)) & 2, "the CCU no longer reads the mode"
    got = await tb.csr_read(DENIED)
    assert got == before + len(hidden), \
        f"DENIED counted {got - before} of {len(hidden)} refused host reads"
    await tb.check_csr(DENIED, what="DENIED after refused host reads")
    # data keeps flowing with the key the host could not replace
    phys = next(p for p in range(CONTEXTS) if cfg.xbctx_of(p))
    for p in frame_packets(write_frame(bytes(12), bytes(96)), rng, tile=1, xbctx=cfg.xbctx_of(phys)[0],
                           addr=cfg.region_of_phys(phys)[0]):
        tb.request(p)
    await tb.drain()
    assert open_frame(keys[phys], blocks_out(tb.pcie_o.queue)) == bytes(96)
    # leaving trusted mode takes a reset
    await tb.csr_write("ccu", STATUS, 0xFFFF_FFFF)
    assert (await tb.csr_read(STATUS)) & 2
    await tb.reset()
    assert not (await tb.csr_read(STATUS)) & 2, "trusted mode survived a reset"
    await tb.csr_write("host", ADDR_KXBCTXMAP, 3)
    assert (await tb.csr_read(ADDR_KXBCTXMAP)) == 3, "host locked out after reset"
    # trusted mode straight after reset: the reset configuration is consistent
    await tb.reset()
    await tb.csr_write("ccu", CTRL, 1)
    assert await wait_trusted(tb), "the reset configuration was refused"
    assert not (await tb.csr_read(STATUS)) & 1, "the reset configuration raised CONFIG"
    await tb.check_status()


@cocotb.test()
async def ccu_config_frozen_in_trusted_mode(dut):
    """The CCU's order: configure, install keys, then CTRL.trust. In trusted mode a CCU write to
    any configuration register (KXBCTXMAP, KPHYSMAP, KSEL_BASE, KSEL_LIMIT) is refused and
    counted in DENIED, including one in the cycle right after the CTRL.trust write (the
    check is running); the traffic keeps following the configuration that was checked, and
    keys still install."""
    tb, rng, cfg, keys = await setup(dut, 0.1, 0.1)
    phys = next(p for p in range(CONTEXTS) if cfg.xbctx_of(p))
    other = (phys + 1) % CONTEXTS
    xb = cfg.xbctx_of(phys)[0]
    base, limit = cfg.region_of_phys(phys)
    b0, l0 = cfg.regions[0]
    await tb.csr_write("ccu", CTRL, 1)
    # moving the context's region elsewhere (onto region 0, so the move is visible), remapping its
    # xbctx and its KPHYSMAP entry, widening region 0: all refused
    moves = [(ADDR_KSEL_BASE + 4 * cfg.kp[phys], b0), (ADDR_KSEL_LIMIT + 4 * cfg.kp[phys], l0),
             (ADDR_KXBCTXMAP + 4 * xb, other), (ADDR_KPHYSMAP + 4 * phys, cfg.kp[other]),
             (ADDR_KSEL_LIMIT, 0xFFFF_FFF0)]
    for addr, value in moves:
        await tb.csr_write("ccu", addr, value)
    assert await wait_trusted(tb), "trusted mode not entered with a good configuration"
    assert not (await tb.csr_read(STATUS)) & 1, "CONFIG raised for a consistent configuration"
    for addr, _ in moves:
        await tb.check_csr(addr, what=f"config at {addr:#x} after refused CCU writes")
    got = await tb.csr_read(DENIED)
    assert got == len(moves), f"DENIED counted {got} of {len(moves)} refused CCU writes"
    await tb.check_csr(DENIED, what="DENIED after refused CCU writes")
    # the checked configuration holds: a frame in the old region passes under the key ...
    pt = rng.randbytes(96)
    for p in frame_packets(write_frame(rng.randbytes(12), pt), rng, tile=1, xbctx=xb, addr=base):
        tb.request(p)
    # ... a clear write beyond region 0's old limit is refused ...
    tb.request(Packet(header(tile=2, xbctx=xb, addr=l0, length=BB), rand_beats(rng, 1)))
    await tb.drain()
    assert open_frame(keys[phys], blocks_out(tb.pcie_o.queue)) == pt
    assert [e.cause for e in tb.model.exceptions] == [Cause.CLEAR]
    # ... and a key installed in trusted mode is the one the next frame uses
    new_key = rng.randbytes(32)
    await tb.configure_keys({phys: new_key})
    mark = len(tb.pcie_o.queue)
    pt = rng.randbytes(96)
    for p in frame_packets(write_frame(rng.randbytes(12), pt), rng, tile=1, xbctx=xb, addr=limit - 128):
        tb.request(p)
    await tb.drain()
    assert open_frame(new_key, blocks_out(list(tb.pcie_o.queue)[mark:])) == pt
    await tb.check_status()


@cocotb.test()
async def region_end_past_4gib(dut):
    """A request's end ``addr + length`` is compared with the limit in 33 bits: with a key
    region and region 0 reaching the top of the address space (limit 2**32 - 16·L), a
    frame ending at the limit passes, while packets that run to 2**32 or wrap past it (end mod
    2**32 is small and would pass a 32-bit compare) are refused, REGION / CLEAR, as the model
    says."""
    tb, rng, cfg, keys = await setup(dut)
    top = (1 << 32) - BB
    phys = next(p for p in range(CONTEXTS) if cfg.xbctx_of(p))
    xb = cfg.xbctx_of(phys)[0]
    r = cfg.kp[phys]
    # region r at the top, region 0 just below it (an unchecked configuration: no trusted mode here)
    await tb.csr_writes([(ADDR_KSEL_BASE + 4 * r, top - 64 * BB), (ADDR_KSEL_LIMIT + 4 * r, top),
                         (ADDR_KSEL_BASE, top - 128 * BB), (ADDR_KSEL_LIMIT, top)])
    small = beats_of(small_frame(rng), LANES)
    pt = rng.randbytes(96)
    inside = frame_packets(write_frame(rng.randbytes(12), pt), rng, tile=4, xbctx=xb, addr=top - 128)
    for p in inside:
        tb.request(p)
    W = dict(tile=5, xbctx=xb, aes=1, cc=1)
    probes = [
        Packet(header(**W, addr=top - BB, length=2 * BB), small),                   # ends at 2**32
        Packet(header(**W, addr=top, length=2 * BB), small),                        # wraps to 16·L
        Packet(header(tile=5, xbctx=xb, aes=1, kind=Kind.READ_REQ, addr=top - 2 * BB, length=8 * BB)),  # wraps
        Packet(header(tile=6, xbctx=xb, addr=top - BB, length=4 * BB), rand_beats(rng, 4)),   # clear, wraps
    ]
    for p in probes:
        tb.request(p)
    await tb.drain()
    assert open_frame(keys[phys], blocks_out(tb.pcie_o.queue)) == pt, "the frame ending at the limit"
    causes = [e.cause for e in tb.model.exceptions]
    assert causes == [Cause.REGION] * 3 + [Cause.CLEAR], f"probes raised {causes}"
    await tb.check_status()


def write_frames_out(tb):
    """The encrypted write frames ``pcie_o`` carried, as ``(key_index, blocks)``: a frame ends
    with the last beat of its ``cc`` packet."""
    frames, cur = [], []
    for v in tb.pcie_o.queue:
        cur.append(v)
        if beat_dict(v)["last"] and beat_dict(v)["hdr"]["cc"]:
            frames.append((beat_dict(v)["hdr"]["key_index"], blocks_out(cur)))
            cur = []
    return frames


@cocotb.test()
async def key_install_during_traffic(dut):
    """KEY_W0..7 and KEY_COMMIT written while write frames and read completions stream on other
    contexts: every beat of the traffic matches the model (write frames open in OpenSSL under
    their keys, completions decrypt), and the new key is installed: the next write frame on its
    context opens under it, and a completion frame sealed under it verifies."""
    tb, rng, cfg, keys = await setup(dut, 0.1, 0.1)
    target = next(p for p in range(CONTEXTS) if cfg.xbctx_of(p))
    busy = [p for p in range(CONTEXTS) if p != target and cfg.xbctx_of(p)][:3]
    sent, read = [], []
    size = 224          # payload bytes: a frame of 14 + 2 blocks, whole beats at every lanes value
    for k in range(10 * LANES):     # wider beats drain a frame sooner: still streaming at the install
        phys = busy[k % len(busy)]
        pt = rng.randbytes(size)
        for p in frame_packets(write_frame(rng.randbytes(12), pt), rng, tile=k, xbctx=cfg.xbctx_of(phys)[0],
                               addr=cfg.region_of_phys(phys)[0]):
            tb.request(p)
        sent.append((phys, pt))
        rpt = rng.randbytes(size)
        frame = sealed_frame(keys[phys], rng.randbytes(12), rpt)
        for p in frame_packets(frame, rng, tile=3, xbctx=0, addr=0x4000, kind=Kind.READ_CPL, key_index=phys):
            tb.completion(p)
        read.append(rpt)
    # the key words go in while those frames stream (one CSR write per cycle at most)
    for _ in range(30):
        await RisingEdge(tb.clk)
    out_before = tb.pcie_o.received + tb.xb_o.received
    new_key = rng.randbytes(32)
    await tb.configure_keys({target: new_key})
    assert tb.pcie_o.received + tb.xb_o.received > out_before, \
        "control: no beat left while the key was written"
    assert not tb.xb_i.empty() or not tb.pcie_i.empty(), "control: the traffic ended before the key install"
    await tb.drain()
    frames = write_frames_out(tb)
    assert [ki for ki, _ in frames] == [p for p, _ in sent]
    for (_, blocks), (phys, pt) in zip(frames, sent):
        assert open_frame(keys[phys], blocks) == pt, f"context {phys}: a frame written during the key install"
    got = blocks_out(tb.xb_o.queue)
    n = size // 16 + 2
    for k, rpt in enumerate(read):
        assert bytes_of(got[k * n + 1:(k + 1) * n - 1]) == rpt, "a completion decrypted during the key install"
    # the new key is in place in both engines
    mark_w, mark_r = len(tb.pcie_o.queue), len(tb.xb_o.queue)
    pt = rng.randbytes(96)
    for p in frame_packets(write_frame(rng.randbytes(12), pt), rng, tile=9, xbctx=cfg.xbctx_of(target)[0],
                           addr=cfg.region_of_phys(target)[0]):
        tb.request(p)
    rpt = rng.randbytes(96)
    for p in frame_packets(sealed_frame(new_key, rng.randbytes(12), rpt), rng, tile=3, xbctx=0, addr=0x8000,
                           kind=Kind.READ_CPL, key_index=target):
        tb.completion(p)
    await tb.drain()
    assert open_frame(new_key, blocks_out(list(tb.pcie_o.queue)[mark_w:])) == pt, "the new key was not installed"
    assert bytes_of(blocks_out(list(tb.xb_o.queue)[mark_r:])[1:-1]) == rpt, "the read engine lacks the new key"
    assert not tb.model.exceptions, f"exceptions {tb.model.exceptions[:3]}"
    await tb.check_status()


@cocotb.test()
async def key_slots_read_zero(dut):
    tb = SxpTB(dut)
    await tb.reset()
    for port in ("ccu", "host"):
        for k in range(KEY_WORDS):
            await tb.csr_write(port, ADDR_KEY + 4 * k, 0xA5A5_0000 | k)
        for k in range(KEY_WORDS):
            for rport in ("ccu", "host"):
                assert await tb.csr_read(ADDR_KEY + 4 * k, rport) == 0, "a key word reads back"
        assert await tb.csr_read(ADDR_KEY_COMMIT, port) == 0


@cocotb.test()
async def reset_scrubs(dut):
    """After a reset with a frame in flight and a key staged but not committed: each
    engine's AES refuses input for exactly ``GcmCore.flush_cycles`` cycles, and no signal
    or memory word holds a word of a context key, of its round keys, of H..H^LANES, of the
    frame's E_K(J0) or GHASH partial hashes, or of the staged key (before the reset, as a
    control, the same scan finds every one of those kinds in the live design); nothing
    from before the reset comes out, and the old keys do not work."""
    tb = SxpTB(dut)
    flush = GcmCore(lanes=LANES).flush_cycles       # the RTL's own figure
    # the engines' AES input (the SXP's own ports buffer in front of them)
    engines = {name: getattr(dut, name).gcm.aes for name in ("engine_w", "engine_r")}
    refused = {name: Refusals(tb.clk, dut.rst, aes.i__ready) for name, aes in engines.items()}

    async def flushes(what):
        for name, r in refused.items():
            got = await r.after_reset()
            assert got == flush, f"{what}: {name} refused input for {got} cycles after " \
                                 f"reset, not GcmCore.flush_cycles = {flush}"

    await tb.reset()
    await flushes("power-on")
    skip = ("xb_i__", "pcie_i__", "ccu__", "host__")
    scanner = Scanner(dut, skip)
    await ReadOnly()
    scanner.baseline()
    await RisingEdge(tb.clk)
    scans = []                          # read in the first cycle the write engine is ready
    refused["engine_w"].on_ready = lambda: scans.append(scanner.scan())
    rng = random.Random(random.getrandbits(32))
    cfg = random_config(rng, CONTEXTS, align=BB)
    keys = {p: rng.randbytes(32) for p in range(CONTEXTS)}
    await tb.configure(cfg, keys)
    secrets = [s for k in keys.values() for s in gcm_key_secrets(k, LANES)]
    # stage a key without committing it, and run traffic
    staged = rng.randbytes(32)
    secrets.append(bytes_secret("staged key", "staged", staged))
    await tb.csr_writes([(ADDR_KEY + 4 * k, int.from_bytes(staged[4 * k:4 * k + 4], "little"))
                         for k in range(KEY_WORDS)])
    nonce = rng.randbytes(12)
    frame = write_frame(nonce, rng.randbytes(992))
    secrets += gcm_frame_secrets(keys[0], nonce, frame[1:-1], False, "frame")
    for p in frame_packets(frame, rng, tile=1, xbctx=cfg.xbctx_of(0)[0],
                           addr=cfg.region_of_phys(0)[0]):
        tb.request(p)
    await scanner.control(secrets, tb.clk, 400, {s.kind for s in secrets})
    await RisingEdge(tb.clk)
    tb.xb_i.clear()
    await tb.reset()
    await flushes("after the frame")
    tb.pcie_o.clear()
    tb.exp_w.clear()
    scanner.assert_clean(secrets, "when the engines were ready after the reset", scans[-1])
    await settle(tb, 20)
    await ReadOnly()
    scanner.assert_clean(secrets, "20 cycles after the reset")
    await settle(tb)
    assert not tb.pcie_o.queue, "a beat from before the reset came out"
    # nothing of the old keys works: a frame on a configured context errs
    await tb.configure(cfg)
    await tb.csr_writes([(ADDR_KEY_COMMIT, 0)])     # commits the (scrubbed) staging: zero key
    tb.request(Packet(header(tile=1, xbctx=cfg.xbctx_of(1 % CONTEXTS)[0],
                             addr=cfg.region_of_phys(1 % CONTEXTS)[0], length=2 * BB, aes=1, cc=1),
                      beats_of(small_frame(rng), LANES)))
    await tb.drain()
    assert tb.model.record.cause is Cause.FRAME


@cocotb.test()
async def one_read_per_context(dut):
    """A second read on a busy context parks; reads on other contexts pass meanwhile; the
    parked one leaves when the first read's cc completion has passed."""
    tb, rng, cfg, keys = await setup(dut, 0.1, 0.1)
    a, b = 0, 1 % CONTEXTS

    def read(phys, tile):
        return Packet(header(kind=Kind.READ_REQ, tile=tile, xbctx=cfg.xbctx_of(phys)[0],
                             addr=cfg.region_of_phys(phys)[0], length=128, aes=1))

    def tiles():
        return [beat_dict(v)["hdr"]["tile"] for v in tb.pcie_o.queue]
    tb.request(read(a, 1))
    tb.request(read(a, 2))      # parks
    tb.request(read(b, 3))      # passes the parked one
    await settle(tb)
    assert tiles() == [1, 3], f"pcie_o carried reads of tiles {tiles()}, expected [1, 3]"
    assert (await tb.csr_read(RD_BUSY)) == (1 << a) | (1 << b)
    frame = sealed_frame(keys[a], rng.randbytes(12), rng.randbytes(96))
    pk = frame_packets(frame, rng, tile=1, xbctx=0, addr=0, kind=Kind.READ_CPL, key_index=a)
    for p in pk[:-1]:
        tb.completion(p)
    await settle(tb)
    assert len(tb.pcie_o.queue) == 2, "the parked read left before the cc completion"
    tb.completion(pk[-1])
    await settle(tb)
    assert tiles() == [1, 3, 2], f"after the release pcie_o carried {tiles()}"
    # documented head-of-line case: a read to a context whose slot is full stalls xb_i
    if CONTEXTS > 2:
        c = 2
        tb.request(read(a, 4))      # parks (tile 2's read is outstanding on a)
        tb.request(read(a, 5))      # slot full: waits at the head of xb_i ...
        tb.request(read(c, 6))      # ... and so does this one
        await settle(tb)
        assert tiles() == [1, 3, 2], f"xb_i did not stall behind a full slot: {tiles()}"
        frame = sealed_frame(keys[a], rng.randbytes(12), rng.randbytes(96))
        for p in frame_packets(frame, rng, tile=2, xbctx=0, addr=0, kind=Kind.READ_CPL, key_index=a):
            tb.completion(p)
        await settle(tb)
        assert tiles() == [1, 3, 2, 4, 6], f"after the second release pcie_o carried {tiles()}"
        assert (await tb.csr_read(RD_BUSY)) == (1 << a) | (1 << b) | (1 << c)
        for phys, tile in ((a, 4), (b, 3), (c, 6), (a, 5)):
            frame = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(96))
            for p in frame_packets(frame, rng, tile=tile, xbctx=0, addr=0, kind=Kind.READ_CPL,
                                   key_index=phys):
                tb.completion(p)
    await tb.drain()
    await tb.check_status()


@cocotb.test()
async def parked_read_on_every_context(dut):
    """On every physical context a second read parks behind the first and leaves only once
    the first read's cc completion has passed; the other contexts' reads are not held. (The
    functional bins sxp_parked.context.)"""
    tb, rng, cfg, keys = await setup(dut, 0.1, 0.1)

    def read(phys, tile):
        return Packet(header(kind=Kind.READ_REQ, tile=tile, xbctx=cfg.xbctx_of(phys)[0],
                             addr=cfg.region_of_phys(phys)[0], length=128, aes=1))

    def tiles():
        return sorted(beat_dict(v)["hdr"]["tile"] for v in tb.pcie_o.queue)
    first, second = list(range(1, CONTEXTS + 1)), list(range(101, 101 + CONTEXTS))
    for phys in range(CONTEXTS):
        tb.request(read(phys, first[phys]))
        tb.request(read(phys, second[phys]))      # parks: the first is outstanding
    await settle(tb)
    assert tiles() == first, f"pcie_o carried the reads of tiles {tiles()}, expected only the first ones {first}"
    for phys in random.sample(range(CONTEXTS), CONTEXTS):
        frame = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(96))
        for p in frame_packets(frame, rng, tile=first[phys], xbctx=0, addr=0, kind=Kind.READ_CPL, key_index=phys):
            tb.completion(p)
        await settle(tb)
        assert second[phys] in tiles(), f"context {phys}: the parked read did not leave after the cc completion"
    assert tiles() == sorted(first + second), f"pcie_o carried {tiles()}"
    for phys in range(CONTEXTS):
        frame = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(96))
        for p in frame_packets(frame, rng, tile=second[phys], xbctx=0, addr=0, kind=Kind.READ_CPL,
                               key_index=phys):
            tb.completion(p)
    await tb.drain()
    await tb.check_status()


@cocotb.test()
async def host_port_configures_before_trusted_mode(dut):
    """Before trusted mode the host port programs the SXP as the CCU port does: with every
    configuration register and every key written from the host, the registers read back as
    written, and a write frame on every physical context goes to its region under its key
    (it opens in OpenSSL) with no exception."""
    tb = SxpTB(dut, 0.1, 0.1)
    await tb.reset()
    rng = random.Random(random.getrandbits(32))
    cfg = random_config(rng, CONTEXTS, align=BB)
    keys = {p: rng.randbytes(32) for p in range(CONTEXTS)}
    await tb.configure(cfg, keys, port="host")
    for base, n in ((ADDR_KXBCTXMAP, 16), (ADDR_KPHYSMAP, CONTEXTS), (ADDR_KSEL_BASE, 17), (ADDR_KSEL_LIMIT, 17)):
        for k in range(n):
            await tb.check_csr(base + 4 * k, what=f"register {base + 4 * k:#x} written from the host")
    sent = []
    for phys in range(CONTEXTS):
        pt = rng.randbytes(96)
        for p in frame_packets(write_frame(rng.randbytes(12), pt), rng, tile=phys, xbctx=cfg.xbctx_of(phys)[0],
                               addr=cfg.region_of_phys(phys)[0]):
            tb.request(p)
        sent.append((phys, pt))
    await tb.drain()
    frames = write_frames_out(tb)
    assert [ki for ki, _ in frames] == list(range(CONTEXTS)), f"frames left on contexts {[ki for ki, _ in frames]}"
    for (_, blocks), (phys, pt) in zip(frames, sent):
        assert open_frame(keys[phys], blocks) == pt, f"context {phys}: OpenSSL opened a different plaintext"
    assert not tb.model.exceptions, f"exceptions {tb.model.exceptions[:3]}"
    await tb.check_status()


@cocotb.test()
async def directions_are_independent(dut):
    """xb_o blocked: write frames still stream on pcie_o; pcie_o blocked: completions flow."""
    tb, rng, cfg, keys = await setup(dut)
    tb.xb_o.enabled = False
    frame = sealed_frame(keys[0], rng.randbytes(12), rng.randbytes(992))
    for p in frame_packets(frame, rng, tile=1, xbctx=0, addr=0, kind=Kind.READ_CPL, key_index=0):
        tb.completion(p)
    wf = beats_of(write_frame(rng.randbytes(12), rng.randbytes(992)), LANES)
    phys = 1 % CONTEXTS
    for p in frame_packets(blocks_of_beats(wf, LANES), rng, tile=2, xbctx=cfg.xbctx_of(phys)[0],
                           addr=cfg.region_of_phys(phys)[0]):
        tb.request(p)
    await settle(tb, 200)
    assert tb.pcie_o.received == len(wf), f"writes stalled behind xb_o: {tb.pcie_o.received}/{len(wf)}"
    tb.xb_o.enabled = True
    tb.pcie_o.enabled = False
    frame = sealed_frame(keys[0], rng.randbytes(12), rng.randbytes(992))
    for p in frame_packets(frame, rng, tile=1, xbctx=0, addr=0, kind=Kind.READ_CPL, key_index=0):
        tb.completion(p)
    for p in frame_packets(write_frame(rng.randbytes(12), rng.randbytes(992)), rng, tile=2,
                           xbctx=cfg.xbctx_of(phys)[0], addr=cfg.region_of_phys(phys)[0]):
        tb.request(p)
    await settle(tb, 200)
    assert tb.xb_o.received == 2 * len(wf), f"completions stalled behind pcie_o: {tb.xb_o.received}"
    tb.pcie_o.enabled = True
    await tb.drain()


@cocotb.test()
async def full_rate_both_directions(dut):
    """Writes on xb_i and completions on pcie_i at full rate at the same time, every output
    ready: once both outputs have started, both deliver a beat on every cycle until the
    first of them runs out (a functional property: no shared resource between the
    directions, no bubble at packet or frame boundaries), and every beat matches the model."""
    tb, rng, cfg, keys = await setup(dut)
    frames = max(4, 32 // LANES)
    w, r = full_rate_traffic(tb, rng, cfg, keys, frames)
    seen = await transfer_cycles(tb, w, r)
    start = max(seen["pcie_o"][0], seen["xb_o"][0])
    end = min(seen["pcie_o"][-1], seen["xb_o"][-1])
    window = end - start + 1
    assert window > w // 2, f"control: the steady window ({window} cycles) is too short"
    for port in seen:
        busy = sum(start <= c <= end for c in seen[port])
        assert busy == window, (f"{port} delivered a beat on {busy} of the {window} cycles "
                                f"{start}..{end} in which both outputs were streaming")
    await tb.drain()
    assert not tb.model.exceptions, f"exceptions {tb.model.exceptions[:3]}"


@pytest.mark.parametrize("design", ["sxp", "sxp_x4"])
def test_sxp(design):
    """pytest entry: the cocotb regression of sxp (16 contexts) on Verilator, at lanes 1
    (``sxp``) and 4 (``sxp_x4``; the lanes come from the width of its ports)."""
    from tb.common.sim import run

    run(design, "tb.sxp.test_sxp", params={})


@pytest.mark.skipif(not os.environ.get("SXP_CONTEXTS4"),
                    reason="a third sxp build (≈ 70 s of CPU with its 16 tests); set SXP_CONTEXTS4=1")
def test_sxp_contexts_4():
    """A build with 4 physical contexts (KXBCTXMAP may name contexts it does not have)."""
    from tb.common.sim import run

    run("sxp", "tb.sxp.test_sxp", params={"contexts": 4})
