"""cocotb regression of ``cc_dma`` (hw/cc/dma.py): statuses and memory against the golden
model (sw/cc/model.py) under idle cycles and back-pressure on every stream, and frames
against OpenSSL (``cryptography``'s AESGCM through the host shim sw/cc/host.py): the
device's frames open on the host, the host's frames are accepted, tampered, replayed or
misdirected frames are rejected with nothing written."""
import random

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from hw.cc import CCDma
from hw.cc.layout import CTR_LIMIT, Dir, Status
from sw.cc.host import FrameError, HostChannel, blocks
from sw.cc.model import Desc
from tb.common.scrub import (
    Refusals,
    Scanner,
    gcm_key_secrets,
)
from tb.common.stream import random_pause

from .env import (
    BOUNCE,
    CHANNELS,
    FRAME_BLOCKS,
    PARAMS,
    PROT,
    Alloc,
    DmaTB,
    Timeline,
    check_outbound,
    fill,
    inbound,
    install_channels,
    install_keys_with_secrets,
    outbound,
    read_frame,
    traffic,
    traffic_under_new_keys,
)

# cycles desc and key are refused after reset while the staging buffer is scrubbed: the RTL's own
SCRUB = CCDma(**PARAMS).scrub_cycles
# staging words, from the parameters as docs/cc.md gives them (slots x frame_blocks blocks)
STAGING_WORDS = PARAMS.get("slots", 4) * FRAME_BLOCKS


def staging_words(dut):
    """Every word of the staging buffer, read one by one through its handle (a buffer of
    another size than ``STAGING_WORDS`` fails: no word is left out of the check)."""
    assert len(dut.staging) == STAGING_WORDS, \
        f"the staging buffer has {len(dut.staging)} words, not slots x frame_blocks = {STAGING_WORDS}"
    return [int(dut.staging[k].value) for k in range(STAGING_WORDS)]


def mark_unwritten_staging(dut):
    """Write a nonzero marker into every staging word that holds zero (the words the
    traffic did not write), so that a scrub that misses any word leaves something to find.
    Returns how many were marked."""
    marked = 0
    for k, w in enumerate(staging_words(dut)):
        if w == 0:
            dut.staging[k].value = (0xA5 << 120) | (k + 1)
            marked += 1
    return marked


def assert_staging_zero(dut, what):
    words = staging_words(dut)
    left = [k for k, w in enumerate(words) if w]
    assert not left, f"{what}: {len(left)} of {len(words)} staging words not zero after the scrub, " \
                     f"first {left[:8]}"


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.3], stall=[0.0, 0.4])
async def random_regression(dut, idle, stall):
    """Batches of random descriptors on all channels: outbound and inbound frames of
    1..frame_blocks blocks, tampered, replayed and misdirected frames, bad regions,
    lengths and channels, a channel without key; key reinstalls between batches."""
    tb = DmaTB(dut, idle, stall)
    await tb.reset()
    keyless = (CHANNELS - 1,)
    chans = await install_channels(tb, keyless)
    prot, bounce = Alloc(PROT), Alloc(BOUNCE)
    tag = 0
    for _batch in range(4 if (idle or stall) else 6):
        outs = []
        for _ in range(12):
            tag = (tag + 1) & 0xFF
            r = random.random()
            n = random.choice([1, 2, 3, random.randint(1, FRAME_BLOCKS), FRAME_BLOCKS])
            ch = random.randrange(CHANNELS - 1)
            if r < 0.4:
                d, pt = outbound(tb, prot, bounce, ch, n, tag)
                outs.append((d, pt))
            elif r < 0.75:
                d, _ = inbound(tb, chans, prot, bounce, ch, n, tag)
            elif r < 0.85:
                how = random.choice(["tamper", "replay", "badiv"])
                d, _ = inbound(tb, chans, prot, bounce, ch, n, tag, how)
            else:
                kind = random.choice(["region", "length", "channel", "nokey"])
                d = Desc(random.choice(list(Dir)), ch, n, prot.take(n), bounce.take(n + 2), tag)
                if d.dir is Dir.IN:
                    d.src, d.dst = d.dst, d.src
                if kind == "region":
                    if random.random() < 0.5:
                        d.src = random.choice([PROT[0] - 1, PROT[1] - n + 1, BOUNCE[1] - n - 1])
                    else:
                        d.dst = random.choice([PROT[1], BOUNCE[0] - 2, BOUNCE[1] - n - 1, 0])
                elif kind == "length":
                    d.len = random.choice([0, FRAME_BLOCKS + 1, 0xFFFF])
                elif kind == "channel":
                    d.ch = random.randrange(CHANNELS, 16)
                else:
                    d.ch = keyless[0]
            tb.submit(d)
        await tb.drain()
        check_outbound(tb, chans, outs)
        if random.random() < 0.5:                           # rekey a channel between batches
            ch = random.randrange(CHANNELS - 1)
            key, iv = random.randbytes(32), random.randrange(1 << 20)
            await tb.install(ch, key, iv)
            chans[ch] = HostChannel(key, ch, iv)
    codes = {s["code"] for _, s in tb.statuses}
    assert Status.OK in codes and len(codes) >= 4, f"too few outcomes covered: {codes}"


@cocotb.test()
async def openssl_round_trip(dut):
    """Directed: outbound frames of 1, 2 and frame_blocks blocks decrypt on the host; host
    frames are accepted and land in protected memory; a tampered ciphertext, tag or IV,
    a replayed frame and a frame of another channel are rejected and write nothing."""
    tb = DmaTB(dut)
    await tb.reset()
    chans = await install_channels(tb)
    prot, bounce = Alloc(PROT), Alloc(BOUNCE)
    outs = []
    for n, tag in ((1, 1), (2, 2), (FRAME_BLOCKS, 3)):
        d, pt = outbound(tb, prot, bounce, 0, n, tag)
        tb.submit(d)
        outs.append((d, pt))
    await tb.drain()
    check_outbound(tb, chans, outs)
    # a frame replayed to the host is refused by the shim
    d0 = outs[0][0]
    try:
        chans[0].open(read_frame(tb.mem, d0.dst, d0.len + 2))
        raise AssertionError("the host accepted a replayed device frame")
    except FrameError:
        pass
    # host -> device
    h = chans[1]
    good_pt = random.randbytes(16 * 5)
    good = h.seal(good_pt)
    src, dst = bounce.take(7), prot.take(5)
    for k, b in enumerate(blocks(good)):
        tb.poke(src + k, b)
    tb.submit(Desc(Dir.IN, 1, 5, src, dst, 10))
    await tb.drain()
    assert read_frame(tb.mem, dst, 5) == good_pt, "host frame not committed"
    cases = []
    for what, pos in (("ciphertext", 20), ("tag", 7 * 16 - 1), ("iv counter", 0), ("iv pad", 8)):
        pt = random.randbytes(16 * 5)
        frame = bytearray(h.seal(pt))
        frame[pos] ^= 0x10 if what != "iv counter" else 0x00
        if what == "iv counter":            # a larger counter than sealed: the tag fails
            frame[3] ^= 0x01
        cases.append((what, bytes(frame)))
    cases.append(("replay", good))
    cases.append(("other channel", HostChannel(chans[2].key, 2).seal(random.randbytes(80))))
    for what, frame in cases:
        src, dst = bounce.take(7), prot.take(5)
        for k, b in enumerate(blocks(frame)):
            tb.poke(src + k, b)
        sentinel = [random.getrandbits(128) for _ in range(5)]
        for k, b in enumerate(sentinel):
            tb.poke(dst + k, b)
        before = len(tb.writes)
        code = tb.submit(Desc(Dir.IN, 1, 5, src, dst, 11))
        await tb.drain()
        assert code is not Status.OK, f"{what}: the model accepts it"
        st = tb.statuses[-1][1]["code"]
        assert st is not Status.OK, f"{what}: accepted"
        assert all(tb.mem.get(dst + k) == sentinel[k] for k in range(5)), f"{what}: protected memory changed"
        assert len(tb.writes) == before, f"{what}: {len(tb.writes) - before} writes issued"
        tb.log.info("%s: %s, nothing written", what, st.name)
        # the checked counter is consumed even when the tag then fails (docs/cc.md): the
        # host continues above the counter the status reports
        h.tx = max(h.tx, tb.statuses[-1][1]["ctr"] + 1)
    # after all that, a fresh frame still goes through
    pt = random.randbytes(32)
    frame = h.seal(pt)
    src, dst = bounce.take(4), prot.take(2)
    for k, b in enumerate(blocks(frame)):
        tb.poke(src + k, b)
    tb.submit(Desc(Dir.IN, 1, 2, src, dst, 12))
    await tb.drain()
    assert read_frame(tb.mem, dst, 2) == pt


@cocotb.test()
async def iv_exhaustion_and_rekey(dut):
    """The outbound counter never repeats under one key: a key installed with counter
    2^32 - 3 seals two frames, the third is refused (IV_EXHAUSTED, no read, no write)
    until a new key resets the counter; an inbound counter of 2^32 - 1 is refused."""
    tb = DmaTB(dut, stall=0.2)
    await tb.reset()
    key = random.randbytes(32)
    await tb.install(0, key, CTR_LIMIT - 2)
    h = HostChannel(key, 0, CTR_LIMIT - 2)
    prot, bounce = Alloc(PROT), Alloc(BOUNCE)
    for tag in (1, 2, 3):
        d, pt = outbound(tb, prot, bounce, 0, 4, tag)
        writes = len(tb.writes)
        tb.submit(d)
        await tb.drain()
        st = tb.statuses[-1][1]
        if tag < 3:
            assert st["code"] is Status.OK and st["ctr"] == CTR_LIMIT - 3 + tag
            assert h.open(read_frame(tb.mem, d.dst, 6)) == pt
        else:
            assert st["code"] is Status.IV_EXHAUSTED, f"third frame: {st}"
            assert len(tb.writes) == writes, "an exhausted channel wrote"
    key2 = random.randbytes(32)
    await tb.install(0, key2, 0)
    d, pt = outbound(tb, prot, bounce, 0, 4, 4)
    tb.submit(d)
    await tb.drain()
    assert tb.statuses[-1][1]["ctr"] == 0 and HostChannel(key2, 0).open(read_frame(tb.mem, d.dst, 6)) == pt
    # inbound: counter 2^32 - 1 is never acceptable
    hk = HostChannel(key2, 0)
    frame = bytearray(hk.seal(b"\x00" * 16, ctr=CTR_LIMIT - 1))
    frame[:4] = (CTR_LIMIT).to_bytes(4, "little")
    src, dst = bounce.take(3), prot.take(1)
    for k, b in enumerate(blocks(bytes(frame))):
        tb.poke(src + k, b)
    tb.submit(Desc(Dir.IN, 0, 1, src, dst, 5))
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.REPLAY


@cocotb.test()
async def bad_descriptors(dut):
    """Each descriptor error: bad channel, zero or too long a length, source or
    destination off either end of its region by one block (both directions), no key.
    Issuer errors read nothing; none writes anything; statuses stay in order with good
    descriptors around them."""
    tb = DmaTB(dut)
    await tb.reset()
    await install_channels(tb, keyless=(1,))
    prot, bounce = Alloc(PROT), Alloc(BOUNCE)
    n = 4
    cases = [
        ("channel", Desc(Dir.OUT, CHANNELS, n, PROT[0], BOUNCE[0]), Status.CHANNEL),
        ("len 0", Desc(Dir.OUT, 0, 0, PROT[0], BOUNCE[0]), Status.LENGTH),
        ("len max+1", Desc(Dir.IN, 0, FRAME_BLOCKS + 1, BOUNCE[0], PROT[0]), Status.LENGTH),
        ("out src below", Desc(Dir.OUT, 0, n, PROT[0] - 1, BOUNCE[0]), Status.REGION),
        ("out src above", Desc(Dir.OUT, 0, n, PROT[1] - n + 1, BOUNCE[0]), Status.REGION),
        ("out dst above", Desc(Dir.OUT, 0, n, PROT[0], BOUNCE[1] - n - 1), Status.REGION),
        ("out dst in prot", Desc(Dir.OUT, 0, n, PROT[0], PROT[0] + 100), Status.REGION),
        ("in src below", Desc(Dir.IN, 0, n, BOUNCE[0] - 1, PROT[0]), Status.REGION),
        ("in dst above", Desc(Dir.IN, 0, n, BOUNCE[0], PROT[1] - n + 1), Status.REGION),
        ("in dst in bounce", Desc(Dir.IN, 0, n, BOUNCE[0], BOUNCE[0] + 100), Status.REGION),
        ("addr wrap", Desc(Dir.OUT, 0, n, (1 << 32) - 2, BOUNCE[0]), Status.REGION),
        ("no key", Desc(Dir.OUT, 1, n, PROT[0], BOUNCE[0]), Status.NO_KEY),
    ]
    edges = [("out exact fit", Desc(Dir.OUT, 0, n, PROT[1] - n, BOUNCE[1] - n - 2), Status.OK)]
    for k, (what, d, want) in enumerate(cases + edges):
        d.tag = k
        fill(tb, d.src, 1) if d.dir is Dir.OUT and PROT[0] <= d.src < PROT[1] else None
        reads, writes = tb.reads, len(tb.writes)
        good, _ = outbound(tb, prot, bounce, 0, 2, 100 + k)
        code = tb.submit(d, label=what)
        tb.submit(good, label=f"good after {what}")
        assert code is want, f"{what}: model says {code}, the spec {want}"
        await tb.drain()
        st = tb.statuses[-2][1]
        assert st["code"] is want, f"{what}: RTL status {st}"
        if want in (Status.CHANNEL, Status.LENGTH, Status.REGION):
            assert tb.reads - reads == 2, f"{what}: {tb.reads - reads - 2} blocks read"
        if want is not Status.OK:
            assert len(tb.writes) - writes == 4, f"{what}: wrote"


@cocotb.test()
async def reset_scrubs(dut):
    """The reset scrub (a reset is the FLR of cc_dma: in a chip its rst is cc_ctrl's
    ``rst | flr``). ``desc`` is refused for exactly ``CCDma.scrub_cycles`` cycles after
    each reset (``key`` too); afterwards every staging word is zero and no signal or memory
    word holds a word of a channel key, of its round keys, of H, of a frame's E_K(J0) or
    GHASH partial hashes, or of a frame's plaintext — the decrypted plaintext of a frame
    whose tag failed included (before the reset, as a control, the same scan finds every
    one of those kinds, that plaintext in the staging buffer). Reset once after the traffic
    drained and once with frames in flight, whose reads memory answers after the reset all
    the same; then every channel answers NO_KEY, and traffic under new keys matches the
    model (the stale responses were dropped)."""
    tb = DmaTB(dut)
    # (key.ready also waits for key.valid, so the count is taken on desc)
    refused = Refusals(tb.clk, dut.rst, dut.desc__ready)

    refusals = []               # (which reset, cycles desc was refused after it)

    async def reset_and_count(what, stale=False, mark=True):
        # every staging word holds something before the reset: the words the traffic wrote
        # (plaintext) and a marker in the others; after it, every word must read zero
        # (checked before the refusal count, so that a scrub that stops short fails on content).
        # Not at power-on: the scrub that starts from the initial state already walks then.
        if mark:
            marked = mark_unwritten_staging(dut)
            await ReadOnly()
            assert all(staging_words(dut)), f"{what}: control: a staging word is still zero before the reset"
            dut._log.info("%s: %d of %d staging words marked before the reset", what, marked, STAGING_WORDS)
            await FallingEdge(tb.clk)       # out of the read-only phase, before the next edge
        await tb.reset(stale=stale)
        refusals.append((what, await refused.after_reset()))
        await ReadOnly()
        assert_staging_zero(dut, what)
        await RisingEdge(tb.clk)

    def assert_refusal_counts():
        # at the end: the power-on scrub cannot be marked (it walks from the initial state),
        # so a scrub that stops short must first fail the content check after the traffic
        for what, got in refusals:
            assert got == SCRUB, f"{what}: desc refused for {got} cycles after reset, not " \
                                 f"CCDma.scrub_cycles = {SCRUB}"

    await reset_and_count("power-on", mark=False)
    scanner = Scanner(dut, skip=("desc__", "key__", "rd_resp__"))
    await ReadOnly()
    scanner.baseline()
    await RisingEdge(tb.clk)
    keys, chans, secrets = await install_keys_with_secrets(tb, 5)
    prot, bounce = Alloc(PROT), Alloc(BOUNCE)
    secrets += await traffic(tb, chans, keys, prot, bounce, 0, 2)
    await scanner.control(secrets, tb.clk, 2000, {s.kind for s in secrets})
    await RisingEdge(tb.clk)
    await tb.drain()
    assert [s["code"] for _, s in tb.statuses].count(Status.AUTH) == 1, "the tampered frame passed"
    # the tampered frame's plaintext waits in the staging buffer, never authenticated
    tampered = [s for s in secrets if s.kind == "plaintext" and s.label == "desc 0 plaintext"]
    await ReadOnly()
    hits = scanner.find(tampered)
    assert any("staging" in h.path for h in hits), \
        f"control: the unauthenticated plaintext is not in the staging buffer ({hits[:3]})"
    await RisingEdge(tb.clk)
    tb.key_src.clear()
    await reset_and_count("after the traffic")
    await ReadOnly()
    scan = scanner.assert_clean(secrets, "after the reset")
    assert not scan.nonzero(("staging",)), f"staging words not zero after the scrub: {scan.nonzero(('staging',))}"
    await RisingEdge(tb.clk)

    # again with frames in flight: new keys, traffic, a reset in the middle of it
    keys = [random.randbytes(32) for _ in range(CHANNELS)]
    for ch in range(CHANNELS):
        await tb.install(ch, keys[ch], 9)
        chans[ch] = HostChannel(keys[ch], ch, 9)
    more = [s for k in keys for s in gcm_key_secrets(k)]
    more += await traffic(tb, chans, keys, prot, bounce, 100, 2)     # (enough to outlast the wait)
    for _ in range(random.randint(80, 200)):
        await RisingEdge(tb.clk)
    # then on to a cycle with a read in flight, whose answer memory holds from then on
    # until after the reset (some seeds reach the random cycle while the engine only
    # writes or waits for a status; and an answer due before the reset edge would land;
    # answers already queued at the driver are dropped by its reset, not delivered late)
    for _ in range(2000):
        if tb._pending or tb.req_sink.queue or not tb.expected:
            tb._hold_responses = True
            break
        await RisingEdge(tb.clk)
    assert tb.expected, "every frame finished before the reset"
    tb.key_src.clear()
    # memory answers the reads in flight after the reset all the same (within the scrub)
    await reset_and_count("with frames in flight", stale=True)
    assert tb.stale_responses, "control: no read was in flight at the reset"
    assert tb.resp_src.empty() and not tb._pending, (
        f"{len(tb.resp_src.queue) + len(tb._pending)} of {tb.stale_responses} responses to "
        f"reads from before the reset not taken by the end of the scrub: rd_resp must take "
        f"and drop them while it runs")
    tb.resp_src.clear()     # the bus lines are the testbench's: the last response stays on them
    tb.model_mem = dict(tb.mem)         # the model ran those frames whole; the RTL did not
    await ReadOnly()
    scan = scanner.assert_clean(secrets + more, "after a reset with frames in flight")
    assert not scan.nonzero(("staging",)), "staging words not zero after the scrub"
    await RisingEdge(tb.clk)

    for ch in range(CHANNELS):
        d, _ = outbound(tb, prot, bounce, ch, 1, ch)
        tb.submit(d)
    await tb.drain()
    assert all(s["code"] is Status.NO_KEY for _, s in tb.statuses[-CHANNELS:])
    # the stale responses were dropped, not taken for data: new keys, traffic, all as the model
    await traffic_under_new_keys(tb, chans, prot, bounce, 20, 200)
    assert_refusal_counts()


@cocotb.test()
async def status_after_writes(dut):
    """A status means "done": for every frame, its status is transferred at a later edge
    than its last ``wr`` beat (OUT: IV, ciphertext and tag in the bounce buffer; IN: the
    committed plaintext) and its last ``rd_resp`` beat, under heavy back-pressure on
    ``wr`` (a driver that reads the bounce buffer or protected memory on seeing OK must
    not read stale data). A frame writes exactly its own blocks: len + 2 (OUT OK), len
    (IN OK) or none (any error). Frames of both directions, all channels, random lengths,
    failures in between; every address is used by one frame only."""
    tb = DmaTB(dut, idle=0.2)
    tb.wr_sink.set_pause(random_pause(0.6))
    line = Timeline(dut, tb.clk)
    await tb.reset()
    chans = await install_channels(tb)
    prot, bounce = Alloc(PROT), Alloc(BOUNCE)
    frames = []                 # (label, desc, code)
    for k in range(28):
        n = random.choice([1, 2, random.randint(1, FRAME_BLOCKS), FRAME_BLOCKS])
        ch = random.randrange(CHANNELS)
        r = random.random()
        if r < 0.45:
            d, _ = outbound(tb, prot, bounce, ch, n, k)
        elif r < 0.85:
            d, _ = inbound(tb, chans, prot, bounce, ch, n, k)
        elif r < 0.95:
            d, _ = inbound(tb, chans, prot, bounce, ch, n, k, random.choice(["tamper", "badiv"]))
        else:
            d, _ = outbound(tb, prot, bounce, ch, n, k)
            d.dst = 0                     # outside both regions: REGION, reads nothing
        frames.append((k, d, tb.submit(d, label=k)))
    await tb.drain()
    await RisingEdge(tb.clk)
    line.stop()
    assert len(line.status) == len(frames), f"{len(line.status)} statuses seen, {len(frames)} sent"
    rd_at = 0                   # rd_resp beats are in descriptor order
    for (label, d, code), st_cycle in zip(frames, line.status):
        if code not in (Status.CHANNEL, Status.LENGTH, Status.REGION):
            nrd = d.len + (2 if d.dir is Dir.IN else 0)
            last_rd = line.rd_resp[rd_at + nrd - 1]
            rd_at += nrd
            assert last_rd < st_cycle, \
                f"frame {label} ({d.dir.name}, {code.name}): status at cycle {st_cycle} before its " \
                f"last read data (cycle {last_rd})"
        span = d.len + 2 if d.dir is Dir.OUT else d.len
        mine = [c for c, a in line.wr if d.dst <= a < d.dst + span]
        want = span if code is Status.OK else 0
        assert len(mine) == want, \
            f"frame {label} ({d.dir.name}, {code.name}): {len(mine)} writes to its range, not {want}"
        if mine:
            assert max(mine) < st_cycle, \
                f"frame {label} ({d.dir.name}): status at cycle {st_cycle}, its last write accepted " \
                f"at cycle {max(mine)} — a driver would read stale data"
    assert rd_at == len(line.rd_resp), f"{len(line.rd_resp) - rd_at} read beats of no frame"
    outs = {d.dir for _, d, c in frames if c is Status.OK}
    assert outs == {Dir.OUT, Dir.IN}, f"only {outs} frames succeeded"


def test_cc_dma():
    """pytest entry: this module's cocotb tests on ``cc_dma``."""
    from tb.common.sim import run

    run("cc_dma", "tb.cc.test_cc_dma")
