"""Unit tests of the SXP golden model against independent references (``cryptography``'s
AESGCM for frames; hand-written expectations for the checks and registers), at ``lanes``
1, 2 and 4 (a beat of 16·L bytes; addresses and lengths multiples of 16·L)."""
import random

import pytest
from cryptography.exceptions import InvalidTag

from hw.sxp.packet import Kind
from hw.sxp.regs import ADDR_KEY, ADDR_KPHYSMAP, ADDR_KSEL_BASE, ADDR_KSEL_LIMIT, ADDR_KXBCTXMAP, KEY_WORDS, Cause
from sw.ccu.sxp_port import SxpKeyPort
from sw.sxp.config import program, random_config
from sw.sxp.driver import ModelBus, SxpCsrDriver
from sw.sxp.frames import (
    FRAME_SIZES,
    FRAMING_CASES,
    IV_BEAT,
    beats_of,
    blocks_of,
    blocks_of_beats,
    bytes_of,
    framing_case,
    open_frame,
    sealed_frame,
    split_sizes,
    write_frame,
)
from sw.sxp.model import ModelError, SxpModel

KEY = bytes(range(32))
LANES = [1, 2, 4]


def setup(seed=1, contexts=16, lanes=1):
    rng = random.Random(seed)
    model = SxpModel(contexts, lanes)
    drv = SxpCsrDriver(ModelBus(model, "ccu"))
    cfg = random_config(rng, contexts, align=16 * lanes)
    program(drv, cfg)
    keys = {p: rng.randbytes(32) for p in range(contexts)}
    for p, k in keys.items():
        drv.install_key(p, k)
    return rng, model, drv, cfg, keys


def blocks_out(model, packets):
    """The blocks of the beats of *packets*, in order."""
    return blocks_of_beats([d for p in packets for d in p.data], model.lanes)


def write_packets(model, cfg, phys, blocks, rng, addr=None, tile=5):
    """A frame (blocks) as aes write requests of random whole-beat sizes; what leaves."""
    bb, lanes = model.beat_bytes, model.lanes
    addr = cfg.region_of_phys(phys)[0] if addr is None else addr
    xb = cfg.xbctx_of(phys)[0]
    out, a, k = [], addr, 0
    for size in split_sizes(16 * len(blocks), rng, step=bb):
        n = size // 16
        last = k + n == len(blocks)
        out += model.request(dict(kind=Kind.WRITE_REQ, tile=tile, xbctx=xb, addr=a, length=size,
                                  aes=1, cc=int(last)), beats_of(blocks[k:k + n], lanes))
        a, k = a + size, k + n
    return out


def completions(model, phys, blocks, rng, addr=0x1000, tile=7):
    """A frame (blocks) as aes completions of random whole-beat sizes; what leaves on xb_o."""
    bb, lanes = model.beat_bytes, model.lanes
    out, a, k = [], addr, 0
    for size in split_sizes(16 * len(blocks), rng, step=bb):
        n = size // 16
        last = k + n == len(blocks)
        o, _ = model.completion(dict(kind=Kind.READ_CPL, tile=tile, addr=a, length=size, aes=1,
                                     cc=int(last), key_index=phys), beats_of(blocks[k:k + n], lanes))
        out += o
        a, k = a + size, k + n
    return out


def test_driver_is_a_key_port():
    assert isinstance(SxpCsrDriver(lambda a, v: None), SxpKeyPort)


@pytest.mark.parametrize("lanes", LANES)
def test_beats_are_little_endian_bytes(lanes):
    """A beat is the little-endian integer of its 16·L bytes: block k is bytes 16k.."""
    data = random.Random(lanes).randbytes(16 * lanes * 3)
    beats = beats_of(blocks_of(data), lanes)
    bb = 16 * lanes
    assert beats == [int.from_bytes(data[i:i + bb], "little") for i in range(0, len(data), bb)]
    assert bytes_of(blocks_of_beats(beats, lanes)) == data
    if lanes > 1:
        with pytest.raises(ValueError):
            beats_of([1] * (lanes + 1), lanes)
    with pytest.raises(ValueError):
        split_sizes(48 * lanes, random.Random(0), step=32 * lanes)
    sizes = split_sizes(1024, random.Random(lanes), step=16 * lanes)
    assert sum(sizes) == 1024 and all(s % (16 * lanes) == 0 and s <= 256 for s in sizes)


def test_lanes_are_checked():
    for bad in (0, 3, 8, True):
        with pytest.raises(ValueError):
            SxpModel(16, bad)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("size", FRAME_SIZES)
def test_write_frames_open_in_openssl(size, lanes):
    rng, model, _, cfg, keys = setup(size, lanes=lanes)
    for phys in (0, 7, 15):
        nonce, pt = rng.randbytes(12), rng.randbytes(size - 32)
        pkts = write_packets(model, cfg, phys, write_frame(nonce, pt), rng)
        assert all(p.hdr["key_index"] == phys for p in pkts)
        assert all(len(p.data) == p.hdr["length"] // (16 * lanes) for p in pkts)
        assert open_frame(keys[phys], blocks_out(model, pkts)) == pt
    assert model.exceptions == []


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("size", FRAME_SIZES)
def test_sealed_frames_pass_the_read_path(size, lanes):
    rng, model, _, cfg, keys = setup(size + 1, lanes=lanes)
    nonce, pt = rng.randbytes(12), rng.randbytes(size - 32)
    frame = sealed_frame(keys[3], nonce, pt)
    out = blocks_out(model, completions(model, 3, frame, rng))
    assert out[0] == frame[0] and out[-1] == frame[-1]
    assert bytes_of(out[1:-1]) == pt
    assert model.exceptions == []
    forged = frame[:-1] + [frame[-1] ^ 1]
    out = blocks_out(model, completions(model, 3, forged, rng, tile=9, addr=0x2000))
    # the tag-slot beat (at L > 1 also the data blocks it carries) reaches the tile as zero;
    # the beats before it are decrypted anyway (the tile discards the frame)
    assert out[-lanes:] == [0] * lanes, "a failed frame's tag-slot beat must reach the tile as zero"
    assert bytes_of(out[1:-lanes]) == pt[:len(pt) - 16 * (lanes - 1)]
    assert [(e.cause, e.tile) for e in model.exceptions] == [(Cause.AUTH, 9)]
    assert model.record.cause is Cause.AUTH and model.exc


@pytest.mark.parametrize("lanes", LANES)
def test_write_and_read_frame_on_one_context(lanes):
    """Two engines: a write frame and a read frame open on the same physical context at the
    same time do not disturb each other, interleaved packet by packet."""
    rng, model, _, cfg, keys = setup(11, lanes=lanes)
    phys, bb = 6, 16 * lanes
    xb = cfg.xbctx_of(phys)[0]
    base = cfg.region_of_phys(phys)[0]
    wpt, rpt = rng.randbytes(1024 - 32), rng.randbytes(512 - 32)
    wblocks = write_frame(rng.randbytes(12), wpt)
    rblocks = sealed_frame(keys[phys], rng.randbytes(12), rpt)
    wbeats, rbeats = beats_of(wblocks, lanes), beats_of(rblocks, lanes)
    wout, rout = [], []
    for k in range(max(len(wbeats), len(rbeats))):      # one beat per packet, alternating
        if k < len(wbeats):
            wout += model.request(dict(kind=Kind.WRITE_REQ, tile=1, xbctx=xb, addr=base + k * bb,
                                       length=bb, aes=1, cc=int(k == len(wbeats) - 1)),
                                  [wbeats[k]])
        if k < len(rbeats):
            o, _ = model.completion(dict(kind=Kind.READ_CPL, tile=2, addr=k * bb, length=bb,
                                         aes=1, cc=int(k == len(rbeats) - 1), key_index=phys),
                                    [rbeats[k]])
            rout += o
    assert model.exceptions == []
    assert open_frame(keys[phys], blocks_out(model, wout)) == wpt
    got = blocks_out(model, rout)
    assert bytes_of(got[1:-1]) == rpt and got[-1] == rblocks[-1]
    # a key commit reaches both engines: the next frames in both directions use the new key
    key = rng.randbytes(32)
    SxpCsrDriver(ModelBus(model, "ccu")).install_key(phys, key)
    pt = rng.randbytes(96)
    assert open_frame(key, blocks_out(model, write_packets(model, cfg, phys,
                                                           write_frame(bytes(12), pt), rng))) == pt
    got = blocks_out(model, completions(model, phys, sealed_frame(key, bytes(12), pt), rng))
    assert bytes_of(got[1:-1]) == pt and model.exceptions == []


@pytest.mark.parametrize("lanes", LANES)
def test_openssl_rejects_a_tampered_write(lanes):
    rng, model, _, cfg, keys = setup(3, lanes=lanes)
    blocks = blocks_out(model, write_packets(model, cfg, 2, write_frame(bytes(12), bytes(96)), rng))
    blocks[2] ^= 1
    with pytest.raises(InvalidTag):
        open_frame(keys[2], blocks)


def _request_cases(lanes, base, limit, xb):
    """(header, cause) of requests that fail their check at *lanes*: every cause a request can
    have, misaligned addresses and lengths among them."""
    bb = 16 * lanes
    w = dict(kind=Kind.WRITE_REQ, tile=3, xbctx=xb, aes=1)
    r = dict(w, kind=Kind.READ_REQ)
    cases = [
        (dict(w, addr=limit - bb, length=2 * bb), Cause.REGION),
        (dict(w, addr=base - bb, length=2 * bb), Cause.REGION),
        (dict(r, addr=limit - 2 * bb, length=4 * bb), Cause.REGION),
        (dict(w, aes=0, addr=base, length=bb), Cause.CLEAR),
        (dict(r, aes=0, addr=base, length=bb), Cause.CLEAR),
        (dict(w, addr=base, length=bb + 8), Cause.MALFORMED),          # length % 16
        (dict(w, addr=base + 8, length=bb), Cause.MALFORMED),          # address % 16
        (dict(r, addr=base + 8, length=bb), Cause.MALFORMED),
        (dict(r, addr=base, length=bb + 8), Cause.MALFORMED),
        (dict(w, addr=base, length=0), Cause.MALFORMED),
        (dict(w, addr=base, length=256 + bb), Cause.MALFORMED),        # write payload > 256
        (dict(r, addr=base, length=1024 + bb), Cause.MALFORMED),       # read > 1 KiB
        (dict(w, addr=base, length=bb, cc=1), Cause.MALFORMED),        # opens and closes a frame
        (dict(w, kind=Kind.READ_CPL, addr=base, length=bb), Cause.MALFORMED),
    ]
    if lanes > 1:       # multiples of 16 but not of a beat: misaligned at these lanes only
        cases += [
            (dict(w, addr=base + 16, length=bb), Cause.MALFORMED),
            (dict(w, addr=base, length=bb + 16), Cause.MALFORMED),
            (dict(r, addr=base + 16, length=2 * bb), Cause.MALFORMED),
            (dict(r, addr=base, length=bb + 16), Cause.MALFORMED),
            (dict(w, aes=0, addr=base + 16, length=bb), Cause.MALFORMED),
        ]
    return cases


@pytest.mark.parametrize("lanes", LANES)
def test_request_causes(lanes):
    rng, model, drv, cfg, keys = setup(4, lanes=lanes)
    bb = 16 * lanes
    base, limit = cfg.region_of_phys(1)
    xb = cfg.xbctx_of(1)[0]
    for hdr, cause in _request_cases(lanes, base, limit, xb):
        model.stored["STATUS"]["exc"] = 0
        n = max(1, hdr["length"] // bb) if hdr["kind"] != Kind.READ_REQ else 1
        assert model.request(hdr, [0] * n) == [], hdr
        assert model.record.cause is cause, (hdr, model.record)
        assert (model.record.tile, model.record.addr) == (3, hdr["addr"])
    assert model.exc_count == len(_request_cases(lanes, base, limit, xb))
    # the same packets, aligned, pass (the check above was the alignment, not the region)
    b0, _ = cfg.regions[0]
    assert model.request(dict(kind=Kind.WRITE_REQ, tile=3, xbctx=xb, addr=b0, length=bb), [5])
    assert model.request(dict(kind=Kind.READ_REQ, tile=3, xbctx=xb, addr=base, length=bb, aes=1))
    # MAP: a physical context without a region
    model.stored["STATUS"]["exc"] = 0
    model.csr_write("ccu", ADDR_KPHYSMAP + 4, 0)
    assert model.request(dict(kind=Kind.WRITE_REQ, tile=3, xbctx=xb, addr=base, length=bb,
                              aes=1), [0]) == []
    assert model.record.cause is Cause.MAP
    # FRAME: a context without a key (after reset) — the beats leave as zeros
    model.reset()
    program(drv, cfg)
    out = model.request(dict(kind=Kind.WRITE_REQ, tile=3, xbctx=xb, addr=base, length=2 * bb,
                             aes=1), [1, 2])
    assert out[0].data == [0, 0] and model.record.cause is Cause.FRAME
    assert [e.cause for e in model.exceptions] == [Cause.FRAME] * 2, "one FRAME per refused beat"
    # a clear write inside region 0 passes untouched with key_index 0
    out = model.request(dict(kind=Kind.WRITE_REQ, xbctx=xb, addr=b0, length=2 * bb,
                             key_index=5), [1, 2])
    assert out[0].data == [1, 2] and out[0].hdr["key_index"] == 0


@pytest.mark.parametrize("lanes", LANES)
def test_completion_causes(lanes):
    rng, model, drv, cfg, keys = setup(9, lanes=lanes)
    bb = 16 * lanes
    c = dict(kind=Kind.READ_CPL, tile=4, aes=1, key_index=2)
    cases = [
        dict(c, kind=Kind.WRITE_REQ, addr=0x40 * 16, length=bb),
        dict(c, kind=Kind.READ_REQ, addr=0x40 * 16, length=bb),
        dict(c, addr=0x400, length=bb + 8),
        dict(c, addr=0x408, length=bb),
        dict(c, aes=0, addr=0x408, length=bb),
        dict(c, addr=0x400, length=256 + bb),
        dict(c, addr=0x400, length=0),
        dict(c, addr=0x400, length=bb, cc=1),      # one-beat cc on a context with no frame
    ]
    if lanes > 1:
        cases += [dict(c, addr=0x410, length=bb), dict(c, addr=0x400, length=bb + 16),
                  dict(c, aes=0, addr=0x400, length=bb + 16)]
    for hdr in cases:
        model.stored["STATUS"]["exc"] = 0
        n = max(1, hdr["length"] // bb)
        out, released = model.completion(hdr, [7] * n)
        assert out == [] and released == [], hdr
        assert model.exceptions[-1].cause is Cause.MALFORMED, hdr
        assert (model.record.tile, model.record.addr) == (4, hdr["addr"])
    assert len(model.exceptions) == len(cases)
    # FRAME: an IV with a bad tail; the frame's beats leave as zero, one FRAME each
    frame = sealed_frame(keys[2], bytes(12), bytes(96))
    frame[0] ^= 1 << 120
    out, _ = model.completion(dict(c, addr=0x800, length=128, cc=1), beats_of(frame, lanes))
    assert blocks_out(model, out) == [0] * 8
    assert [e.cause for e in model.exceptions[len(cases):]] == [Cause.FRAME] * (8 // lanes)
    # a completion for a context this SXP does not have: FRAME
    small = SxpModel(4, lanes)
    small.completion(dict(c, key_index=9, addr=0, length=bb), [1])
    assert [e.cause for e in small.exceptions] == [Cause.FRAME]


def test_trusted_mode_and_registers():
    rng, model, drv, cfg, keys = setup(5)
    for k in range(KEY_WORDS):
        model.csr_write("host", ADDR_KEY + 4 * k, 0xDEADBEEF)
        assert model.csr_read(ADDR_KEY + 4 * k) == 0
    drv.set_trusted_mode()
    assert model.trusted and not model.exceptions
    assert model.csr_write("host", ADDR_KSEL_BASE, 5) is False
    assert model.region(0)[0] == cfg.regions[0][0]
    assert model.denied == 1
    # the configuration checked on entry is frozen: the CCU cannot change it either (counted)
    for addr in (ADDR_KSEL_BASE, ADDR_KSEL_LIMIT + 4 * 16, ADDR_KPHYSMAP + 4 * 3, ADDR_KXBCTXMAP + 4 * 15):
        before = model.csr_read(addr, "ccu")
        assert model.csr_write("ccu", addr, before ^ 1) is False
        assert model.csr_read(addr, "ccu") == before
    assert model.denied == 5
    # keys, STATUS and CTRL stay writable by the CCU
    assert model.csr_write("ccu", ADDR_KEY, 0x1234) is True and model.key_stage[0] == 0x1234
    # the host reads nothing in trusted mode (each read counts), the CCU reads as before
    base1 = cfg.regions[1][0]
    assert base1 and model.csr_read(ADDR_KSEL_BASE + 4, "ccu") == base1
    assert model.csr_read(ADDR_KSEL_BASE + 4, "host") == 0
    assert model.csr_read(0x004, "host") == 0          # STATUS: not even the mode bit
    assert model.denied == 7
    assert model.csr_read(0x014, "ccu") == 7
    with pytest.raises(ValueError):
        model.csr_read(0x014, "jtag")


@pytest.mark.parametrize("bad", ["overlap", "duplicate", "unmapped"])
def test_trusted_mode_refuses_inconsistent_config(bad):
    rng, model, drv, cfg, keys = setup(6)
    if bad == "overlap":
        b, lim = cfg.regions[4]
        model.csr_write("ccu", ADDR_KSEL_BASE + 4 * 9, lim - 1)
        model.csr_write("ccu", ADDR_KSEL_LIMIT + 4 * 9, lim + 10)
    elif bad == "duplicate":
        model.csr_write("ccu", ADDR_KPHYSMAP + 4 * 3, cfg.kp[4])
    else:
        model.csr_write("ccu", ADDR_KPHYSMAP + 4 * 3, 0)
    drv.set_trusted_mode()
    assert not model.trusted
    assert model.record.cause is Cause.CONFIG


@pytest.mark.parametrize("lanes", LANES)
def test_one_read_per_context(lanes):
    rng, model, drv, cfg, keys = setup(7, lanes=lanes)
    base, _ = cfg.region_of_phys(2)
    r = dict(kind=Kind.READ_REQ, tile=1, xbctx=cfg.xbctx_of(2)[0], addr=base, length=128, aes=1)
    assert len(model.request(r)) == 1
    assert not model.waits_for_slot(dict(r, tile=2))
    assert model.request(dict(r, tile=2)) == []        # parked
    assert model.rd_busy[2] and model.slot[2] is not None
    # a third read waits at the head of xb_i (the caller holds it); one that fails its
    # check does not wait (it is dropped), nor does a read of another context
    assert model.waits_for_slot(dict(r, tile=3))
    assert not model.waits_for_slot(dict(r, tile=3, addr=base + 8))
    assert not model.waits_for_slot(dict(r, tile=3, xbctx=cfg.xbctx_of(4)[0],
                                         addr=cfg.region_of_phys(4)[0]))
    with pytest.raises(ModelError):
        model.request(dict(r, tile=3))
    beats = beats_of(sealed_frame(keys[2], bytes(12), bytes(96)), lanes)
    half = len(beats) // 2
    outs = []
    for k in (0, half):
        o, rel = model.completion(dict(kind=Kind.READ_CPL, tile=1, addr=16 * lanes * k,
                                       length=16 * lanes * half, aes=1, cc=int(k == half),
                                       key_index=2), beats[k:k + half])
        outs.append(rel)
    assert outs[0] == [] and len(outs[1]) == 1 and outs[1][0].hdr["tile"] == 2
    assert model.rd_busy[2] and model.slot[2] is None


@pytest.mark.parametrize("lanes", LANES)
def test_ccu_order_configure_then_trust(lanes):
    """The CCU writes the configuration, then sets CTRL.trust: the configuration checked on
    entry is the one in force. A configuration write after trust is refused (DENIED) and the
    traffic keeps following the checked configuration."""
    from sw.ccu.sxp_port import SxpRegister
    model = SxpModel(16, lanes)
    drv = SxpCsrDriver(ModelBus(model, "ccu"))
    drv.write_config(SxpRegister.KXBCTXMAP, 0, 0)
    drv.write_config(SxpRegister.KPHYSMAP, 0, 1)
    drv.write_config(SxpRegister.KSELLIMIT_BASE, 1, 0x1000_0000)
    drv.write_config(SxpRegister.KSELLIMIT_LIMIT, 1, 0x2000_0000)
    drv.install_key(0, KEY)
    drv.set_trusted_mode()
    assert model.trusted and model.exceptions == []
    assert model.csr_read(ADDR_KSEL_BASE + 4) == 0x1000_0000
    assert model.csr_read(ADDR_KPHYSMAP + 4 * 5) == 6
    # moving region 1 after trust is refused: the old region still holds
    drv.write_config(SxpRegister.KSELLIMIT_BASE, 1, 0x3000_0000)
    drv.write_config(SxpRegister.KSELLIMIT_LIMIT, 1, 0x4000_0000)
    assert model.denied == 2 and model.csr_read(ADDR_KSEL_BASE + 4) == 0x1000_0000
    out = model.request(dict(kind=Kind.WRITE_REQ, xbctx=0, addr=0x1000_0000, length=128, aes=1,
                             cc=1), beats_of(write_frame(bytes(12), bytes(96)), lanes))
    assert open_frame(KEY, blocks_out(model, out)) == bytes(96)
    assert model.request(dict(kind=Kind.WRITE_REQ, xbctx=0, addr=0x3000_0000, length=16 * lanes, aes=1),
                         [0]) == []
    assert model.record.cause is Cause.REGION
    # the host is locked out
    assert model.csr_write("host", ADDR_KSEL_BASE + 4, 0) is False


@pytest.mark.parametrize("lanes", LANES)
def test_region_end_past_4gib(lanes):
    """``addr + length`` is taken over the integers: a request that runs past 2**32 is
    outside every region (it does not wrap to the bottom), one that ends at the top of a
    region reaching 2**32 - 16·L is inside."""
    model = SxpModel(16, lanes)
    bb = 16 * lanes
    top = (1 << 32) - bb
    model.csr_write("ccu", ADDR_KSEL_BASE, top - 4 * bb)
    model.csr_write("ccu", ADDR_KSEL_LIMIT, top)
    clear = dict(kind=Kind.WRITE_REQ, tile=3, aes=0)
    assert len(model.request(dict(clear, addr=top - 2 * bb, length=2 * bb), [1, 2])) == 1
    assert model.request(dict(clear, addr=top - bb, length=2 * bb), [1, 2]) == []   # ends at 2**32
    assert model.request(dict(clear, addr=top, length=4 * bb), [1, 2, 3, 4]) == []  # wraps past 2**32
    assert [e.cause for e in model.exceptions] == [Cause.CLEAR, Cause.CLEAR]


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("direction", ["write", "completion"])
@pytest.mark.parametrize("case", FRAMING_CASES)
def test_malformed_framing(case, direction, lanes):
    """A packet whose beat count is not length / (16·L): MALFORMED (tile, address), exactly
    length / (16·L) beats leave, zero from the beat where the error shows, the frame never
    verifies, and the next frame on the context works (OpenSSL)."""
    rng, model, _, cfg, keys = setup(8, lanes=lanes)
    bb, phys = 16 * lanes, 5
    xb = cfg.xbctx_of(phys)[0]
    if direction == "write":
        fr = write_frame(rng.randbytes(12), rng.randbytes(224))

        def send(addr, length, data, aes, cc):
            return model.request(dict(kind=Kind.WRITE_REQ, tile=11, xbctx=xb, addr=addr,
                                      length=length, aes=aes, cc=cc), data)
        addr = cfg.region_of_phys(phys)[0]
    else:
        fr = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(224))

        def send(addr, length, data, aes, cc):
            return model.completion(dict(kind=Kind.READ_CPL, tile=11, addr=addr, length=length,
                                         aes=aes, cc=cc, key_index=phys), data)[0]
        addr = 0x400
    packets, want = framing_case(case, beats_of(fr, lanes), lanes, rng)
    out = []
    for n, data, aes, cc in packets:
        a = addr if aes else cfg.regions[0][0]
        out += send(a, n * bb, data, aes, cc)
        addr += n * bb
    assert [len(p.data) for p in out] == [p.hdr["length"] // bb for p in out]
    got = [d for p in out for d in p.data]
    assert len(got) == len(want)
    if want[0] is IV_BEAT:       # lane 0 leaves in clear, the lanes after it are encrypted
        assert got[0] & ((1 << 128) - 1) == fr[0]
        want[0] = None
    assert all(w is None or g == w for g, w in zip(got, want)), (got, want)
    assert model.exceptions[0].cause is Cause.MALFORMED
    assert (model.record.tile, model.record.addr) == (11, out[0].hdr["addr"])
    assert sum(e.cause is Cause.MALFORMED for e in model.exceptions) == 1
    if case.startswith("clear"):
        assert len(model.exceptions) == 1
    # the next frame on the context works
    n = len(model.exceptions)
    pt = rng.randbytes(224)
    if direction == "write":
        pkts = write_packets(model, cfg, phys, write_frame(rng.randbytes(12), pt), rng)
        assert open_frame(keys[phys], blocks_out(model, pkts)) == pt
    else:
        good = sealed_frame(keys[phys], rng.randbytes(12), pt)
        blocks = blocks_out(model, completions(model, phys, good, rng))
        assert bytes_of(blocks[1:-1]) == pt and blocks[-1] == good[-1]
    assert len(model.exceptions) == n
