"""cocotb regression of ``gpu_cc`` (hw/cc/gpu.py): ``cc_ctrl`` and ``cc_dma`` in one design.

- ``mode_rules``: CC off copies plainly and refuses every key install (the host owns BAR0
  there); after the FLR into CC on the host can neither write the key registers nor start
  an install, the DMA answers NO_KEY, the host cannot read protected memory (nor pass for
  the DMA), and only the firmware's key works — its frames open with it on the host, the
  key the host tried does not.
- ``flr_scrubs_dma``: an FLR in the middle of encrypted traffic refuses descriptors for
  ``GpuCC.scrub_cycles`` (the longer of the two scrubs, measured on ``ready`` and on
  ``cc_dma``'s own ``desc.ready``; ``gpu_cc``'s ``desc`` stays refused until the host sets
  ``GPU_READY`` again after it), then no key, round key, H, E_K(J0), partial hash or plaintext is
  in any signal or memory word (the DMA's staging and queues, ``cc_ctrl``'s memory); the
  same scan finds each kind before the FLR; every channel answers NO_KEY afterwards.
- ``openssl_round_trip``: the host shim (``cryptography``/OpenSSL) seals data, the DMA
  brings it in (decrypt, authenticate, commit to protected memory), sends it back out
  (encrypt), and the host opens it: the same bytes; statuses and memory against the
  model, with idle cycles and back-pressure on the host-memory streams.
- ``plain_copy_regression``: CC off's plain copies against :func:`tb.cc.env.plain_copy`
  under idle cycles and back-pressure.
- ``spdm_session_keys``: the CVM driver (``sw.spdm`` requester) and the GPU firmware
  (``sw.spdm`` responder) run an SPDM session; the firmware installs *its* derived keys
  with the exact firmware-port writes of ``sw.spdm.dma.session_key_writes`` (request
  direction on channel 0, response direction on channel 1); the host seals data with the
  requester's request-direction key, the DMA brings it into protected memory, sends it back
  out on channel 1, and the host opens it with the requester's response-direction key.

The RTS, ``GPU_READY`` and the whole attestation flow are in tb/cc/test_gpu_cc_rts.py;
``GpuTB`` sets ``GPU_READY`` after each power-on and FLR here, so the DMA runs in CC on.
"""
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cryptography.exceptions import InvalidTag

from hw.cc import GpuCC
from hw.cc.layout import Dir, Mode, Src, Status
from hw.cc.regs import DMA_KEY_CTRL, DMA_KEY_GO, DMA_KEY_IV
from sw.cc.host import FrameError, HostChannel, blocks
from sw.cc.model import Desc
from sw.spdm.identity import Manufacturer
from sw.spdm.requester import Requester
from sw.spdm.responder import Responder
from tb.common.scrub import Refusals, Scanner

from .env import (
    CHANNELS,
    FRAME_BLOCKS,
    PARAMS,
    REG,
    Alloc,
    GpuTB,
    fill,
    inbound,
    install_keys_with_secrets,
    install_session_keys,
    outbound,
    read_frame,
    traffic,
    traffic_under_new_keys,
)

GPU = GpuCC(**PARAMS)
SCRUB = GPU.scrub_cycles          # desc refused after an FLR in CC on: the RTL's own constant


async def _dec_count(tb):
    return await tb.host.read(REG["DEC_COUNT"])


@cocotb.test()
async def mode_rules(dut):
    """The DMA obeys the mode; keys reach it only through the firmware port."""
    tb = GpuTB(dut)
    await tb.power_on(Mode.OFF)
    prot, bounce = Alloc(tb.PROT), Alloc(tb.BOUNCE)

    # ---- CC off: plain copies both ways, region and length checks ----------------------
    n = random.randint(2, FRAME_BLOCKS)
    d, pt = outbound(tb, prot, bounce, 0, n, 1)
    before = len(tb.writes)
    tb.submit(d)
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.OK, f"CC off plain OUT: {tb.statuses[-1][1]}"
    assert read_frame(tb.mem, d.dst, n) == pt, "CC off: the host memory does not hold the plaintext"
    assert len(tb.writes) - before == n, f"CC off OUT wrote {len(tb.writes) - before} blocks, not {n} (no frame format)"
    src, dst = bounce.take(n), prot.take(n)
    data = fill(tb, src, n)
    tb.submit(Desc(Dir.IN, 0, n, src, dst, 2))
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.OK
    assert b"".join(tb.dev(dst + k).to_bytes(16, "little") for k in range(n)) == data, \
        "CC off plain IN: protected memory does not hold the host's data"
    for bad, want in ((Desc(Dir.OUT, 0, 4, tb.BOUNCE[0], tb.BOUNCE[0] + 64, 3), Status.REGION),
                      (Desc(Dir.IN, 0, 0, tb.BOUNCE[0], 0, 4), Status.LENGTH)):
        assert tb.submit(bad) is want
    await tb.drain()
    assert [s[1]["code"] for s in tb.statuses[-2:]] == [Status.REGION, Status.LENGTH]
    # CC off: the host reads protected memory (nothing is refused in CC off)
    r = await tb.ext_access(Src.HOST, dst)
    assert r["ok"] == 1 and r["data"] == tb.dev(dst), f"CC off host read refused: {r}"

    # ---- CC off: every key install is refused, from either port --------------------------
    key_off = random.randbytes(32)
    dec0 = await _dec_count(tb)
    await tb.write_key_regs(tb.host, key_off)          # BAR0 is open in CC off
    assert await _dec_count(tb) == dec0, "CC off: the decoupler refused a KEY register write"
    await tb.host.write(DMA_KEY_CTRL, DMA_KEY_GO)          # not in BAR0: refused in every mode
    assert await _dec_count(tb) == dec0 + 1, "CC off: the host's DMA_KEY_CTRL write was not refused"
    await tb.install(0, key_off, 0, expect=False)      # the firmware's own try
    st = await tb.key_status()
    assert st == {"busy": 0, "refused": 1, "installs": 0}, f"CC off: a key install was not refused: {st}"

    # ---- into CC on ---------------------------------------------------------------------
    await tb.set_mode(Mode.ON)
    assert not tb.off
    st = await tb.key_status()
    assert st == {"busy": 0, "refused": 0, "installs": 0}, f"after the FLR: {st}"
    key_host = random.randbytes(32)
    dec0 = await _dec_count(tb)
    await tb.write_key_regs(tb.host, key_host)
    await tb.host.write(DMA_KEY_IV, 0)
    await tb.host.write(DMA_KEY_CTRL, DMA_KEY_GO)
    assert await _dec_count(tb) == dec0 + 10, \
        f"CC on: {await _dec_count(tb) - dec0} of the host's 10 key writes refused, not all"
    dec_log = await tb.host.read(REG["DEC_LOG"])
    assert dec_log == (1 << 8) | DMA_KEY_CTRL, f"DEC_LOG {dec_log:#x}: not the host's DMA_KEY_CTRL write"
    assert (await tb.key_status())["installs"] == 0, "CC on: the host started a key install"
    # the DMA has no key: NO_KEY, nothing written
    d, _ = outbound(tb, prot, bounce, 0, 3, 5)
    before = len(tb.writes)
    assert tb.submit(d) is Status.NO_KEY
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.NO_KEY, f"CC on without a key: {tb.statuses[-1][1]}"
    assert len(tb.writes) == before, "CC on without a key: the DMA wrote host memory"
    # the host cannot read protected memory, nor pass for the DMA
    secret_addr = d.src
    for src in (Src.HOST, Src.DMA):
        r = await tb.ext_access(src, secret_addr)
        assert r == {"data": 0, "ok": 0}, f"CC on: host read of protected memory as {src.name}: {r}"
    fw_log = await tb.fw.read(REG["FW_LOG"])
    assert fw_log >> 24 & 3 == 3, f"CC on: the external 'DMA' access logged as initiator {fw_log >> 24 & 3}, not 3"

    # ---- the firmware's key works; the host's does not ----------------------------------
    key = random.randbytes(32)
    await tb.install(0, key, 7)
    assert await tb.key_status() == {"busy": 0, "refused": 0, "installs": 1}
    d, pt = outbound(tb, prot, bounce, 0, FRAME_BLOCKS, 6)
    tb.submit(d)
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.OK, f"CC on OUT: {tb.statuses[-1][1]}"
    frame = read_frame(tb.mem, d.dst, FRAME_BLOCKS + 2)
    assert pt not in frame, "CC on: plaintext in host memory"
    assert HostChannel(key, 0, 7).open(frame) == pt, "the frame does not open with the firmware's key"
    try:
        HostChannel(key_host, 0, 7).open(frame)
        raise AssertionError("the frame opens with the key the host wrote")
    except FrameError:
        pass
    # inbound: sealed with the firmware's key → committed; with the host's → AUTH, no write
    for k, (kk, want) in enumerate(((key, Status.OK), (key_host, Status.AUTH))):
        src, dst = bounce.take(6), prot.take(4)
        data = random.randbytes(64)
        sealed = HostChannel(kk, 0, 7 + k).seal(data)
        for j, b in enumerate(blocks(sealed)):
            tb.poke(src + j, b)
        sentinel = [random.getrandbits(128) for _ in range(4)]
        for j, b in enumerate(sentinel):
            tb.poke(dst + j, b)
        tb.submit(Desc(Dir.IN, 0, 4, src, dst, 7 + k))
        await tb.drain()
        got = tb.statuses[-1][1]["code"]
        assert got is want, f"IN sealed with the {'firmware' if k == 0 else 'host'}'s key: {got.name}, not {want.name}"
        mem = [tb.dev(dst + j) for j in range(4)]
        if want is Status.OK:
            assert b"".join(v.to_bytes(16, "little") for v in mem) == data, "IN: protected memory differs"
        else:
            assert mem == sentinel, "IN with the host's key: protected memory changed"
    tb.check()


@cocotb.test()
async def flr_scrubs_dma(dut):
    """An FLR with encrypted frames in flight scrubs the DMA's keys and staging too. Host
    memory answers the reads in flight after the FLR all the same: those answers are
    dropped (traffic under new keys afterwards matches the model)."""
    tb = GpuTB(dut)
    # desc is refused by both scrubs (cc_ctrl's `ready`, cc_dma's own desc.ready), then
    # until the host sets GPU_READY again (the testbench does at once)
    refused = Refusals(tb.clk, dut.flr, dut.desc__ready)
    ctrl_scrub = Refusals(tb.clk, dut.flr, dut.ready)
    dma_scrub = Refusals(tb.clk, dut.flr, dut.dma.desc__ready)
    await tb.power_on(Mode.ON)
    scanner = Scanner(dut, skip=("desc__", "rd_resp__", "host__", "fw__", "mem_req__"))
    await ReadOnly()
    scanner.baseline()
    await RisingEdge(tb.clk)
    keys, chans, secrets = await install_keys_with_secrets(tb, 3)
    assert (await tb.key_status())["installs"] == CHANNELS
    prot, bounce = Alloc(tb.PROT), Alloc(tb.BOUNCE)
    secrets += await traffic(tb, chans, keys, prot, bounce, 0, 2)
    kinds = {s.kind for s in secrets}
    await scanner.control(secrets, tb.clk, 3000, kinds)
    await RisingEdge(tb.clk)
    for _ in range(random.randint(0, 60)):
        await RisingEdge(tb.clk)
    assert tb.expected, "every frame finished before the FLR: not mid-transfer"
    inflight = len(tb.expected)
    # host memory answers the reads in flight after the FLR all the same
    await tb.flr(wait=False, stale=True)
    got = max(await ctrl_scrub.after_reset(), await dma_scrub.after_reset())
    assert got == SCRUB, f"desc refused for {got} cycles after the FLR, not GpuCC.scrub_cycles = {SCRUB}"
    assert tb.resp_src.empty() and not tb._pending, (
        f"{len(tb.resp_src.queue) + len(tb._pending)} of {tb.stale_responses} host responses "
        f"to reads from before the FLR not taken by the end of the scrub: gpu_cc must take "
        f"and drop them while cc_ctrl scrubs")
    tb.resp_src.clear()     # the bus lines are the testbench's: the last response stays on them
    await ReadOnly()
    scan = scanner.assert_clean(secrets, f"after an FLR with {inflight} frames in flight")
    left = scan.nonzero(("staging", "mem"))
    assert not left, f"memory words not zero after the FLR: {left}"
    await RisingEdge(tb.clk)
    await tb.wait_ready()
    await tb.settle_mode()
    assert not tb.off, "the FLR left CC on"
    top = await refused.after_reset()
    assert top > SCRUB, f"desc taken {top} cycles after the FLR, before the scrub and GPU_READY"
    assert await tb.key_status() == {"busy": 0, "refused": 0, "installs": 0}
    tb.model.reset()
    tb.model_mem = {a: tb.read(a) for a in tb.model_mem}     # the FLR cut the frames short
    for ch in range(CHANNELS):
        d, _ = outbound(tb, prot, bounce, ch, 1, ch)
        tb.submit(d)
    await tb.drain()
    codes = [s["code"] for _, s in tb.statuses[-CHANNELS:]]
    assert codes == [Status.NO_KEY] * CHANNELS, f"after the FLR: {codes}, a key survived"
    # the stale responses were dropped, not routed to a read: new keys, traffic as the model
    await traffic_under_new_keys(tb, chans, prot, bounce, 11, 100)


@cocotb.test()
async def key_write_during_traffic(dut):
    """The firmware writes key words (KEY0..7, DMA_KEY_IV) and installs a new key on
    channel 1 while encrypted frames of channel 0 flow (both directions). The traffic is
    unaffected: statuses and memory as the model, channel 0's OUT frames open with its key.
    The install lands between frames, and channel 1 then uses the new key: its OUT frame
    opens with it and not with the old one, an IN frame sealed with it is committed, one
    sealed with the old key is refused (AUTH) and leaves protected memory as it was."""
    assert CHANNELS >= 2, "needs two channels"
    tb = GpuTB(dut)
    await tb.power_on(Mode.ON)
    key0, key1_old, key1_new = (random.randbytes(32) for _ in range(3))
    await tb.install(0, key0, 100)
    await tb.install(1, key1_old, 200)
    prot, bounce = Alloc(tb.PROT), Alloc(tb.BOUNCE)
    n = max(1, min(FRAME_BLOCKS, tb.PROT[1] // 10))    # ten frames fit protected memory at once
    sender0, outs = HostChannel(key0, 0, 100), []
    for k in range(10):
        if k % 2:
            d, _ = inbound(tb, {0: sender0}, prot, bounce, 0, n, k)
        else:
            d, pt = outbound(tb, prot, bounce, 0, n, k)
            outs.append((d, pt))
        assert tb.submit(d) is Status.OK
    # the key words while channel 0's frames are in flight
    await RisingEdge(tb.clk)
    await tb.write_key_regs(tb.fw, key1_new)
    await tb.fw.write(DMA_KEY_IV, 300)
    assert tb.expected, "control: channel 0's traffic finished before the key words were written"
    in_flight_at_go = len(tb.expected)
    await tb.fw.write(DMA_KEY_CTRL, DMA_KEY_GO | 1)
    for _ in range(10_000):
        if not (await tb.key_status())["busy"]:
            break
    else:
        raise AssertionError("the install on channel 1 never completed")
    await tb.write_key_regs(tb.fw, bytes(32))
    tb.model.install_key(1, key1_new, 300)
    dut._log.info("key install on channel 1 issued with %d of 10 channel-0 frames in flight",
                  in_flight_at_go)
    await tb.drain()
    codes = [s["code"] for _, s in tb.statuses[-10:]]
    assert codes == [Status.OK] * 10, f"channel 0's frames around the key writes: {codes}"
    tb.check()
    receiver0 = HostChannel(key0, 0, 100)
    for d, pt in outs:
        assert receiver0.open(read_frame(tb.mem, d.dst, d.len + 2)) == pt, \
            f"channel 0 OUT frame {d.tag} does not open with channel 0's key"
    assert (await tb.key_status())["installs"] == 3, "not three installs"

    # channel 1 uses the new key: OUT opens with it only
    d, pt = outbound(tb, Alloc(tb.PROT), bounce, 1, n, 20)
    assert tb.submit(d) is Status.OK
    await tb.drain()
    frame = read_frame(tb.mem, d.dst, n + 2)
    assert HostChannel(key1_new, 1, 300).open(frame) == pt, "channel 1's OUT frame does not open with the new key"
    try:
        HostChannel(key1_old, 1, 300).open(frame)
        raise AssertionError("channel 1's OUT frame opens with the old key")
    except FrameError:
        pass
    # IN: sealed with the new key -> committed; with the old key -> AUTH, memory kept
    prot = Alloc(tb.PROT)
    for k, (key, want) in enumerate(((key1_new, Status.OK), (key1_old, Status.AUTH))):
        src, dst = bounce.take(n + 2), prot.take(n)
        data = random.randbytes(16 * n)
        for j, b in enumerate(blocks(HostChannel(key, 1, 300 + k).seal(data))):
            tb.poke(src + j, b)
        sentinel = [random.getrandbits(128) for _ in range(n)]
        for j, b in enumerate(sentinel):
            tb.poke(dst + j, b)
        assert tb.submit(Desc(Dir.IN, 1, n, src, dst, 21 + k)) is want
        await tb.drain()
        got = tb.statuses[-1][1]["code"]
        assert got is want, f"channel 1 IN sealed with the {'new' if k == 0 else 'old'} key: {got.name}"
        mem = [tb.dev(dst + j) for j in range(n)]
        if want is Status.OK:
            assert b"".join(v.to_bytes(16, "little") for v in mem) == data, "channel 1 IN: memory differs"
        else:
            assert mem == sentinel, "channel 1 IN with the old key: protected memory changed"
    tb.check()


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.3], stall=[0.0, 0.4])
async def openssl_round_trip(dut, idle, stall):
    """Host shim → DMA in → protected memory → DMA out → host shim: the same bytes."""
    tb = GpuTB(dut, idle=idle, stall=stall)
    await tb.power_on(Mode.ON)
    chans = {}
    for ch in range(min(CHANNELS, 2)):
        key, iv = random.randbytes(32), random.randrange(1000)
        await tb.install(ch, key, iv)
        chans[ch] = (HostChannel(key, ch, iv), HostChannel(key, ch, iv))   # (sender, receiver)
    bounce = Alloc(tb.BOUNCE)
    for rnd in range(3):
        # protected memory is small (192 blocks at the defaults): three frames of at most
        # frame_blocks each, in disjoint ranges of a fresh allocation per round
        prot = Alloc(tb.PROT)
        jobs = []
        for k in range(3):
            ch = random.randrange(len(chans))
            n = random.choice([1, 2, random.randint(1, FRAME_BLOCKS), FRAME_BLOCKS])
            data = random.randbytes(16 * n)
            sealed = chans[ch][0].seal(data)
            src, dst = bounce.take(n + 2), prot.take(n)
            for j, b in enumerate(blocks(sealed)):
                tb.poke(src + j, b)
            tag = (rnd * 8 + k) & 0xFF
            assert tb.submit(Desc(Dir.IN, ch, n, src, dst, tag)) is Status.OK
            jobs.append((ch, n, dst, data, tag))
        await tb.drain()
        # back out of the device (after the inbound statuses: no read-after-write race)
        outs = []
        for ch, n, prot_addr, data, tag in jobs:
            dst = bounce.take(n + 2)
            assert tb.submit(Desc(Dir.OUT, ch, n, prot_addr, dst, tag | 0x80)) is Status.OK
            outs.append((ch, n, dst, data))
        await tb.drain()
        for ch, n, dst, data in outs:
            got = chans[ch][1].open(read_frame(tb.mem, dst, n + 2))
            assert got == data, f"round {rnd}: channel {ch}, {n} blocks: the host reads other bytes"
    codes = {s["code"] for _, s in tb.statuses}
    assert codes == {Status.OK}, f"statuses {codes}"


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.3], stall=[0.0, 0.4])
async def plain_copy_regression(dut, idle, stall):
    """CC off: random plain copies both ways (1..128 blocks: a plain descriptor is not a
    frame, so it may exceed frame_blocks), in flight together in disjoint ranges, with
    region and length errors among them; statuses in order and both memories against
    :func:`tb.cc.env.plain_copy`, with idle cycles and back-pressure on every stream."""
    tb = GpuTB(dut, idle=idle, stall=stall)
    await tb.power_on(Mode.OFF)
    bounce = Alloc(tb.BOUNCE)
    for rnd in range(3):
        prot = Alloc(tb.PROT)
        left = tb.PROT[1] - tb.PROT[0]
        tag = rnd * 16
        while left >= 8:
            n = random.randint(1, min(128, left))
            left -= n
            r = random.random()
            if r < 0.45:
                src, dst = prot.take(n), bounce.take(n)
                fill(tb, src, n)
                d = Desc(Dir.OUT, random.randrange(CHANNELS), n, src, dst, tag)
            elif r < 0.9:
                src, dst = bounce.take(n), prot.take(n)
                fill(tb, src, n)
                d = Desc(Dir.IN, random.randrange(CHANNELS), n, src, dst, tag)
            elif r < 0.95:
                d = Desc(Dir.OUT, 0, n, tb.BOUNCE[0], tb.BOUNCE[0] + 0x100, tag)   # REGION
            else:
                d = Desc(Dir.IN, 0, 0, tb.BOUNCE[0], 0, tag)                       # LENGTH
            tb.submit(d)
            tag += 1
        await tb.drain()
    codes = [s["code"] for _, s in tb.statuses]
    assert codes.count(Status.OK) >= 3, f"only {codes.count(Status.OK)} copies succeeded"


@cocotb.test()
async def spdm_session_keys(dut):
    """DMA traffic under the keys of a real SPDM session (see the module docstring)."""
    tb = GpuTB(dut)
    await tb.power_on(Mode.ON)
    manufacturer = Manufacturer()
    device = manufacturer.issue_device(0x4100_0001)
    slots = [bytes([i]) * 48 for i in range(64)]
    responder = Responder(device, lambda: slots)
    session = Requester(responder.handle, manufacturer.root).run(h100_order=True)
    fw_keys, cvm_keys = responder.session_keys, session.keys
    # the firmware's writes, as sw.spdm.dma lists them (env.install_session_keys: after each
    # go, wait for the engine to take the key before the eight zero writes that follow it)
    await install_session_keys(tb, fw_keys)
    assert (await tb.key_status())["installs"] == 2, "not two installs"
    to_gpu = HostChannel(cvm_keys.request.key, 0)
    from_gpu = HostChannel(cvm_keys.response.key, 1)
    wrong = HostChannel(cvm_keys.request.key, 1)      # the other direction's key
    bounce, prot = Alloc(tb.BOUNCE), Alloc(tb.PROT)
    for k in range(3):
        n = random.randint(1, FRAME_BLOCKS)
        data = random.randbytes(16 * n)
        src, dst = bounce.take(n + 2), prot.take(n)
        for j, b in enumerate(blocks(to_gpu.seal(data))):
            tb.poke(src + j, b)
        assert tb.submit(Desc(Dir.IN, 0, n, src, dst, 2 * k)) is Status.OK
        await tb.drain()
        assert tb.statuses[-1][1]["code"] is Status.OK, f"frame {k}: the session's request key did not open"
        out = bounce.take(n + 2)
        assert tb.submit(Desc(Dir.OUT, 1, n, dst, out, 2 * k + 1)) is Status.OK
        await tb.drain()
        frame = read_frame(tb.mem, out, n + 2)
        try:
            wrong.open(frame)
        except (FrameError, InvalidTag):
            pass
        else:
            raise AssertionError("an OUT frame opened under the request-direction key")
        assert from_gpu.open(frame) == data, f"frame {k}: the host reads other bytes"
    tb.check()


def test_gpu_cc():
    """pytest entry: this module's cocotb tests on ``gpu_cc``."""
    from tb.common.sim import run

    run("gpu_cc", "tb.cc.test_gpu_cc")
