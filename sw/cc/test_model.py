"""Unit tests of the cc golden models and the host shim against independent references
(``cryptography``'s AESGCM, the allow-list table read directly), and a short Amaranth
simulation of ``cc_ctrl`` against :class:`CCCtrlModel`."""
import random

import pytest
from amaranth.sim import Simulator
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.cc import CCCtrl, CCDma
from hw.cc.layout import CTR_LIMIT, Dir, Mode, Src, Status
from hw.cc.regs import ALLOW, ROWS, SCRUB, allowed, register_map
from sw.cc.host import FrameError, HostChannel, blocks, iv_block, join_blocks, parse_iv
from sw.cc.model import Bus, CCCtrlModel, CCDmaModel, Desc

PROT, BOUNCE = (0x100, 0x200), (0x1000, 0x2000)


def test_parameters_rejected():
    for bad in (dict(depth=3), dict(depth=0), dict(depth=16, protected=17), dict(depth=True)):
        with pytest.raises(ValueError):
            CCCtrl(**bad)
    for bad in (dict(channels=0), dict(channels=17), dict(frame_blocks=48), dict(slots=1),
                dict(addr_bits=4)):
        with pytest.raises(ValueError):
            CCDma(**bad)


def test_iv_layout_is_gcm_j0():
    iv = iv_block(0x01020304, Dir.IN, 3)
    assert iv == bytes([4, 3, 2, 1, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
    assert parse_iv(iv)["ctr"] == 0x01020304


def test_dma_model_round_trip_with_openssl():
    key = random.randbytes(32)
    model = CCDmaModel(4, 64, PROT, BOUNCE)
    model.install_key(2, key, 7)
    pt = random.randbytes(16 * 5)
    mem = {PROT[0] + k: b for k, b in enumerate(blocks(pt))}
    assert model.process(Desc(Dir.OUT, 2, 5, PROT[0], BOUNCE[0]), mem) == (Status.OK, 7)
    frame = join_blocks(mem[BOUNCE[0] + k] for k in range(7))
    assert AESGCM(key).decrypt(frame[:12], frame[16:], None) == pt        # OpenSSL opens it
    assert HostChannel(key, 2, 7).open(frame) == pt
    host = HostChannel(key, 2, 7)
    pt2 = random.randbytes(32)
    sealed = host.seal(pt2)
    for k, b in enumerate(blocks(sealed)):
        mem[BOUNCE[0] + 16 + k] = b
    assert model.process(Desc(Dir.IN, 2, 2, BOUNCE[0] + 16, PROT[0] + 8), mem) == (Status.OK, 7)
    assert join_blocks(mem[PROT[0] + 8 + k] for k in range(2)) == pt2
    # replay, tamper: nothing written
    snapshot = dict(mem)
    assert model.process(Desc(Dir.IN, 2, 2, BOUNCE[0] + 16, PROT[0] + 20), mem)[0] is Status.REPLAY
    bad = bytearray(host.seal(pt2))
    bad[-1] ^= 1
    for k, b in enumerate(blocks(bytes(bad))):
        mem[BOUNCE[0] + 32 + k] = b
    snapshot = dict(mem)
    assert model.process(Desc(Dir.IN, 2, 2, BOUNCE[0] + 32, PROT[0] + 20), mem)[0] is Status.AUTH
    assert mem == snapshot
    # exhaustion
    model.install_key(1, key, CTR_LIMIT - 1)
    assert model.process(Desc(Dir.OUT, 1, 1, PROT[0], BOUNCE[0]), mem) == (Status.OK, CTR_LIMIT - 1)
    assert model.process(Desc(Dir.OUT, 1, 1, PROT[0], BOUNCE[0]), mem) == (Status.IV_EXHAUSTED, CTR_LIMIT)
    assert model.process(Desc(Dir.OUT, 0, 1, PROT[0], BOUNCE[0]), mem)[0] is Status.NO_KEY
    assert model.process(Desc(Dir.OUT, 2, 1, PROT[1], BOUNCE[0]), mem)[0] is Status.REGION
    assert model.process(Desc(Dir.OUT, 2, 65, PROT[0], BOUNCE[0]), mem)[0] is Status.LENGTH


def test_host_shim_refuses():
    key = random.randbytes(32)
    h = HostChannel(key, 1)
    iv = iv_block(0, Dir.IN, 1)                    # host direction: not a device frame
    with pytest.raises(FrameError):
        h.open(iv + AESGCM(key).encrypt(iv[:12], bytes(16), None))
    iv = iv_block(0, Dir.OUT, 1)
    frame = iv + AESGCM(key).encrypt(iv[:12], bytes(16), None)
    assert h.open(frame) == bytes(16)
    with pytest.raises(FrameError):
        h.open(frame)                              # replay


def test_allow_list_table():
    """The decoupler's rule read straight from ALLOW: CC on reaches only the management
    window; CC off reaches every register; unmapped addresses never pass."""
    regs = register_map()
    for r in regs:
        for row in ROWS:
            for write in (False, True):
                key = next(k for k in ALLOW if k == r.name or (k.endswith("*") and r.name.startswith(k[:-1])))
                assert allowed(row, r.addr, write) == (("w" if write else "r") in ALLOW[key][ROWS.index(row)])
    on = {r.name for r in regs if allowed(Mode.ON, r.addr, False) or allowed(Mode.ON, r.addr, True)}
    assert on == {"CC_MODE", "CC_MODE_SET", "CC_STATUS", "DEC_COUNT", "DEC_LOG", "FW_COUNT", "FW_LOG"}
    assert all(allowed(Mode.OFF, r.addr, True) or allowed(Mode.OFF, r.addr, False) for r in regs)
    assert not allowed(Mode.OFF, 0xFC, False) and not allowed(SCRUB, 0x80, False)


def test_ctrl_rtl_matches_model_pysim():
    """A few hundred random cycles of cc_ctrl (depth 16) on Amaranth's simulator against
    the model (fast check; the full regression is tb/cc)."""
    depth = 16
    dut, model = CCCtrl(depth=depth, protected=12), CCCtrlModel(depth, 12)
    rng = random.Random(5)
    addrs = [r.addr for r in register_map()] + [0xFC]
    errors = []

    async def bench(ctx):
        model.power_on(Mode.OFF)   # the simulator starts in the reset state with store = 0
        ctx.set(dut.mem_resp.ready, 1)
        pending = None
        for cyc in range(600):
            flr = int(rng.random() < 0.01)
            h = Bus(*(lambda r: (int(r < 0.3), int(0.3 <= r < 0.5)))(rng.random()),
                    rng.choice(addrs), rng.getrandbits(32))
            if h.addr == 0x04:
                h.w_data &= 3
            req = None
            if rng.random() < 0.5:
                req = (rng.choice(list(Src)).value, rng.randrange(depth), rng.getrandbits(1),
                       rng.getrandbits(128))
            ctx.set(dut.flr, flr)
            for name in ("r_stb", "w_stb", "addr", "w_data"):
                ctx.set(getattr(dut.host, name), getattr(h, name))
            ctx.set(dut.mem_req.valid, req is not None)
            if req:
                ctx.set(dut.mem_req.payload.src, Src(req[0]))
                ctx.set(dut.mem_req.payload.addr, req[1])
                ctx.set(dut.mem_req.payload.write, req[2])
                ctx.set(dut.mem_req.payload.data, req[3])
            took = req is not None and ctx.get(dut.mem_req.ready)
            resp_take = ctx.get(dut.mem_resp.valid)
            if resp_take and pending is not None:
                got = (ctx.get(dut.mem_resp.payload.data), ctx.get(dut.mem_resp.payload.ok))
                if got != pending:
                    errors.append((cyc, "resp", got, pending))
                pending = None
            out = model.step(flr, h, None, req if took else None, bool(resp_take))
            if out["resp"] is not None:
                pending = out["resp"]
            if flr:
                pending = None
            await ctx.tick()
            if h.r_stb and ctx.get(dut.host.r_data) != out["host"]:
                errors.append((cyc, "read", h.addr, ctx.get(dut.host.r_data), out["host"]))
            if ctx.get(dut.mode) != model.active or ctx.get(dut.ready) != model.ready:
                errors.append((cyc, "mode/ready"))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not errors, errors[:3]
