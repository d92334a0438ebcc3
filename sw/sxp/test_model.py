"""Unit tests of the SXP golden model against independent references (``cryptography``'s
AESGCM for frames; hand-written expectations for the checks and registers)."""
import random

import pytest
from cryptography.exceptions import InvalidTag

from hw.sxp.packet import Kind
from hw.sxp.regs import ADDR_KEY, ADDR_KSEL_BASE, ADDR_KSEL_LIMIT, ADDR_KPHYSMAP, Cause, KEY_WORDS
from sw.ccu.sxp_port import SxpKeyPort
from sw.sxp.config import program, random_config
from sw.sxp.driver import ModelBus, SxpCsrDriver
from sw.sxp.frames import (FRAME_SIZES, bytes_of, open_frame, sealed_frame, split_sizes,
                           write_frame)
from sw.sxp.model import SxpModel

KEY = bytes(range(32))


def setup(seed=1, contexts=16):
    rng = random.Random(seed)
    model = SxpModel(contexts)
    drv = SxpCsrDriver(ModelBus(model, "ccu"))
    cfg = random_config(rng, contexts)
    program(drv, cfg)
    keys = {p: rng.randbytes(32) for p in range(contexts)}
    for p, k in keys.items():
        drv.install_key(p, k)
    return rng, model, drv, cfg, keys


def write_packets(model, cfg, phys, blocks, rng, addr=None, tile=5):
    base, limit = cfg.region_of_phys(phys)
    addr = base if addr is None else addr
    xb = cfg.xbctx_of(phys)[0]
    out, a, k = [], addr, 0
    for size in split_sizes(16 * len(blocks), rng):
        n = size // 16
        last = k + n == len(blocks)
        out += model.request(dict(kind=Kind.WRITE_REQ, tile=tile, xbctx=xb, addr=a, length=size,
                                  aes=1, cc=int(last)), blocks[k:k + n])
        a, k = a + size, k + n
    return out


def completions(model, phys, blocks, rng, addr=0x1000, tile=7):
    out, a, k = [], addr, 0
    for size in split_sizes(16 * len(blocks), rng):
        n = size // 16
        last = k + n == len(blocks)
        o, _ = model.completion(dict(kind=Kind.READ_CPL, tile=tile, addr=a, length=size, aes=1,
                                     cc=int(last), key_index=phys), blocks[k:k + n])
        out += o
        a, k = a + size, k + n
    return out


def test_driver_is_a_key_port():
    assert isinstance(SxpCsrDriver(lambda a, v: None), SxpKeyPort)


@pytest.mark.parametrize("size", FRAME_SIZES)
def test_write_frames_open_in_openssl(size):
    rng, model, _, cfg, keys = setup(size)
    for phys in (0, 7, 15):
        nonce, pt = rng.randbytes(12), rng.randbytes(size - 32)
        pkts = write_packets(model, cfg, phys, write_frame(nonce, pt), rng)
        assert all(p.hdr["key_index"] == phys for p in pkts)
        blocks = [b for p in pkts for b in p.data]
        assert open_frame(keys[phys], blocks) == pt
    assert model.exceptions == []


@pytest.mark.parametrize("size", FRAME_SIZES)
def test_sealed_frames_pass_the_read_path(size):
    rng, model, _, cfg, keys = setup(size + 1)
    nonce, pt = rng.randbytes(12), rng.randbytes(size - 32)
    frame = sealed_frame(keys[3], nonce, pt)
    out = [b for p in completions(model, 3, frame, rng) for b in p.data]
    assert out[0] == frame[0] and out[-1] == frame[-1]
    assert b"".join(b.to_bytes(16, "little") for b in out[1:-1]) == pt
    assert model.exceptions == []
    forged = frame[:-1] + [frame[-1] ^ 1]
    out = [b for p in completions(model, 3, forged, rng, tile=9, addr=0x2000) for b in p.data]
    assert out[-1] == 0, "a failed frame's tag slot must reach the tile as zero"
    assert [(e.cause, e.tile) for e in model.exceptions] == [(Cause.AUTH, 9)]
    assert model.record.cause is Cause.AUTH and model.exc


def test_openssl_rejects_a_tampered_write():
    rng, model, _, cfg, keys = setup(3)
    pkts = write_packets(model, cfg, 2, write_frame(bytes(12), bytes(96)), rng)
    blocks = [b for p in pkts for b in p.data]
    blocks[2] ^= 1
    with pytest.raises(InvalidTag):
        open_frame(keys[2], blocks)


def test_causes():
    rng, model, drv, cfg, keys = setup(4)
    base, limit = cfg.region_of_phys(1)
    xb = cfg.xbctx_of(1)[0]
    w = dict(kind=Kind.WRITE_REQ, tile=3, xbctx=xb, aes=1)
    cases = [
        (dict(w, addr=limit - 16, length=32), Cause.REGION),
        (dict(w, addr=base - 16, length=32), Cause.REGION),
        (dict(w, addr=base, length=24), Cause.MALFORMED),
        (dict(w, addr=base, length=272), Cause.MALFORMED),
        (dict(w, addr=base, length=16, cc=1), Cause.MALFORMED),
        (dict(w, kind=Kind.READ_CPL, addr=base, length=16), Cause.MALFORMED),
        (dict(w, aes=0, addr=base, length=16), Cause.CLEAR),
        (dict(w, kind=Kind.READ_REQ, addr=base, length=1040), Cause.MALFORMED),
    ]
    for hdr, cause in cases:
        model.stored["STATUS"]["exc"] = 0
        n = max(1, hdr["length"] // 16) if hdr["kind"] != Kind.READ_REQ else 1
        assert model.request(hdr, [0] * n) == [], hdr
        assert model.record.cause is cause, (hdr, model.record)
        assert (model.record.tile, model.record.addr) == (3, hdr["addr"])
    # MAP: a physical context without a region
    model.stored["STATUS"]["exc"] = 0
    model.csr_write("ccu", ADDR_KPHYSMAP + 4, 0)
    assert model.request(dict(w, addr=base, length=16), [0]) == []
    assert model.record.cause is Cause.MAP
    # FRAME: a context without a key (after reset) — the beats leave as zeros
    model.reset()
    program(drv, cfg)
    model.csr_write("ccu", ADDR_KSEL_BASE, 0)
    model.csr_write("ccu", ADDR_KSEL_LIMIT, 1 << 20)
    out = model.request(dict(w, addr=base, length=32), [1, 2])
    assert out[0].data == [0, 0] and model.record.cause is Cause.FRAME
    # a clear write inside region 0 passes untouched with key_index 0
    out = model.request(dict(w, aes=0, addr=0x100, length=32, key_index=5), [1, 2])
    assert out[0].data == [1, 2] and out[0].hdr["key_index"] == 0


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
    assert model.csr_write("ccu", ADDR_KSEL_BASE, 5) is True


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


def test_one_read_per_context():
    rng, model, drv, cfg, keys = setup(7)
    base, _ = cfg.region_of_phys(2)
    r = dict(kind=Kind.READ_REQ, tile=1, xbctx=cfg.xbctx_of(2)[0], addr=base, length=128, aes=1)
    assert len(model.request(r)) == 1
    assert model.request(dict(r, tile=2)) == []        # parked
    frame = sealed_frame(keys[2], bytes(12), bytes(96))
    outs = []
    for k in range(0, 8, 4):
        o, rel = model.completion(dict(kind=Kind.READ_CPL, tile=1, length=64, aes=1,
                                       cc=int(k == 4), key_index=2), frame[k:k + 4])
        outs.append(rel)
    assert outs[0] == [] and len(outs[1]) == 1 and outs[1][0].hdr["tile"] == 2
    assert model.rd_busy[2]


def test_ccu_order_trust_first():
    """The CCU firmware model (sw/ccu/cce.py) enters trusted mode straight after reset and
    writes the configuration afterwards over its port: the reset configuration must be
    consistent (KPHYSMAP resets to the identity map, regions empty)."""
    from hw.sxp.regs import ADDR_KPHYSMAP, ADDR_KSEL_BASE
    from sw.ccu.sxp_port import SxpRegister
    model = SxpModel()
    drv = SxpCsrDriver(ModelBus(model, "ccu"))
    drv.set_trusted_mode()
    assert model.trusted and model.exceptions == []
    drv.write_config(SxpRegister.KXBCTXMAP, 0, 0)
    drv.write_config(SxpRegister.KPHYSMAP, 0, 1)
    drv.write_config(SxpRegister.KSELLIMIT_BASE, 1, 0x1000_0000)
    drv.write_config(SxpRegister.KSELLIMIT_LIMIT, 1, 0x2000_0000)
    drv.install_key(0, KEY)
    assert model.csr_read(ADDR_KSEL_BASE + 4) == 0x1000_0000
    assert model.csr_read(ADDR_KPHYSMAP + 4 * 5) == 6
    out = model.request(dict(kind=Kind.WRITE_REQ, xbctx=0, addr=0x1000_0000, length=128, aes=1,
                             cc=1), write_frame(bytes(12), bytes(96)))
    assert open_frame(KEY, out[0].data) == bytes(96)
    # the host is locked out
    assert model.csr_write("host", ADDR_KSEL_BASE + 4, 0) is False


@pytest.mark.parametrize("direction", ["write", "completion"])
@pytest.mark.parametrize("case", ["more_in_frame", "more_cc", "fewer_cc", "fewer_opening",
                                  "clear_more", "clear_fewer"])
def test_malformed_framing(direction, case):
    """A packet whose beat count is not length / 16: MALFORMED (tile, address), exactly
    length / 16 beats leave, zero from the beat where the error shows, the frame never
    verifies, and the next frame on the context works (OpenSSL)."""
    rng, model, _, cfg, keys = setup(8)
    phys = 5
    xb = cfg.xbctx_of(phys)[0]
    base = cfg.region_of_phys(phys)[0]
    b0 = cfg.regions[0][0]
    if direction == "write":
        fr = write_frame(rng.randbytes(12), rng.randbytes(96))

        def send(tile, addr, length, data, aes=1, cc=0):
            return model.request(dict(kind=Kind.WRITE_REQ, tile=tile, xbctx=xb, addr=addr,
                                      length=length, aes=aes, cc=cc), data)
        addr = base
    else:
        fr = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(96))

        def send(tile, addr, length, data, aes=1, cc=0):
            return model.completion(dict(kind=Kind.READ_CPL, tile=tile, addr=addr,
                                         length=length, aes=aes, cc=cc, key_index=phys), data)[0]
        addr = 0x40
    X = None
    out = []
    if case == "more_in_frame":
        out += send(11, addr, 32, fr[:4])
        out += send(11, addr + 32, 96, fr[2:], cc=1)
        want = [fr[0]] + [0] * 7
    elif case == "more_cc":
        out += send(11, addr, 128, fr + [1, 2], cc=1)
        want = [fr[0]] + [X] * 6 + [0]
    elif case == "fewer_cc":
        out += send(11, addr, 128, fr[:5], cc=1)
        want = [fr[0], X, X, X, 0, 0, 0, 0]
    elif case == "fewer_opening":
        out += send(11, addr, 64, fr[:1], cc=1)
        want = [0] * 4
    elif case == "clear_more":
        out += send(11, b0, 32, [5, 6, 7], aes=0)
        want = [5, 0]
    else:
        out += send(11, b0, 48, [9], aes=0)
        want = [0, 0, 0]
    assert [len(p.data) for p in out] == [p.hdr["length"] // 16 for p in out]
    got = [b for p in out for b in p.data]
    assert len(got) == len(want)
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
        assert open_frame(keys[phys], [b for p in pkts for b in p.data]) == pt
    else:
        good = sealed_frame(keys[phys], rng.randbytes(12), pt)
        blocks = [b for p in completions(model, phys, good, rng) for b in p.data]
        assert bytes_of(blocks[1:-1]) == pt and blocks[-1] == good[-1]
    assert len(model.exceptions) == n
