"""cocotb regression of ``gpu_cc``'s RTS (the ``MeasurementStore`` on the firmware port) and
its GPU ready state (``GPU_READY``, the CVM's verdict gating the DMA), docs/cc.md.

- ``rts_extend_read``: RTMs extend slots through the firmware port; the RTR reads them back
  through the same port: values equal the hashlib chain SHA-384(old ‖ value) (computed
  here, and by :class:`sw.rts.model.MeasurementStore` alongside), owner = the firmware
  initiator's hardware id (the ``fw_id`` pins), count, ``bound``. The host can neither
  extend nor read nor write the store: its accesses to the whole RTS window are refused by
  ``cc_ctrl``'s decoupler (counted in ``DEC_COUNT``), in CC off, on and devtools alike,
  and every slot stays as it was.
- ``rts_owner_lock``: a slot bound by one firmware initiator refuses every other one
  (``RTS_STATUS.refused``, ``RTS_REFUSED`` counts, slot unchanged) and keeps taking its
  owner's extends; the owner is the initiator on the bus at the go, whatever data the
  firmware wrote.
- ``rts_resets``: FLR (with and without a mode change) leaves every slot, binding, count and
  the refusal counter; the cold reset clears them all (scrub) and frees the bindings.
- ``ready_gates_dma``: in CC on, with keys installed, a descriptor is held (not taken:
  ``desc.ready`` low, no read or write on any memory, no status) while ``GPU_READY`` is 0,
  ``GPU_READY.held`` says so; once the host sets READY it runs. An FLR clears READY (held
  again), a mode write clears it at once and a write of 1 is ignored until the FLR that
  applies the mode; in devtools it gates as in CC on; in CC off it does not gate.
- ``attested_session_flow`` × CC on / devtools: the whole chain. The RTMs of
  ``sw.attest.firmware``'s slot plan extend through the RTL, each as its own initiator
  (VBIOS, driver, and the policy RTM that reads the active CC mode through the firmware
  port, so devtools shows in the report); the RTR (``sw.spdm`` responder) reports the
  slots it read through the RTL; the CVM (``sw.spdm`` requester) runs the session in
  H100 order and gets the signed report; the CVM's local verifier
  (:func:`sw.attest.verifier.verify`: the chain to the device root, OCSP, the nonce it sent,
  the report's signature, the measurements against the driver and VBIOS RIMs of
  ``sw.attest.testbed.Env``, the CC-mode and devtools claims) decides. A report with one
  byte changed, the RIMs of another firmware build, or (in devtools) the default policy,
  which refuses devtools, fail: READY stays 0 and the session-keyed descriptor is held.
  The good evidence passes: the host writes READY and the DMA runs both ways under the
  session's keys (installed through the firmware port).
"""
import hashlib
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cryptography.exceptions import InvalidTag

from hw.cc import GpuCC
from hw.cc.layout import Dir, Mode, Status
from hw.cc.regs import GPU_READY, RTS_CTRL, RTS_DATA, RTS_EXTEND, RTS_READ, RTS_SLOTS, RTS_STATUS, RTS_WORDS
from sw.attest.errors import AttestError
from sw.attest.firmware import ModelledFirmware
from sw.attest.rim import write_rim
from sw.attest.testbed import Env
from sw.attest.verifier import verify
from sw.cc.host import FrameError, HostChannel, blocks
from sw.cc.model import Desc
from sw.rts.model import MeasurementStore as RtsModel
from sw.spdm.requester import Requester
from sw.spdm.responder import Responder

from .env import (
    FRAME_BLOCKS,
    MODE_NAMES,
    PARAMS,
    REG,
    SIG_BYTES,
    Alloc,
    GpuTB,
    install_session_keys,
    measured_boot,
    outbound,
    read_frame,
    recording_rng,
)

GPU = GpuCC(**PARAMS)


def chain(values):
    """SHA-384 extend chain from zero, written out here (not the model's)."""
    v = bytes(48)
    for x in values:
        v = hashlib.sha384(v + x).digest()
    return v


async def dec_count(tb):
    return await tb.host.read(REG["DEC_COUNT"])


async def check_slots(tb, model, slots, what):
    for s in slots:
        got = await tb.rts_read(s)
        want = model.read(s)
        assert got == {"value": want.value, "owner": want.owner, "bound": int(want.bound),
                       "count": want.count}, f"{what}: slot {s}: RTL {got}, model {want}"


async def host_cannot_touch(tb, slots_model, what):
    """Every host access to the RTS window is refused and counted; no slot changes."""
    d0 = await dec_count(tb)
    n = 0
    for k in range(RTS_WORDS):
        await tb.host.write(RTS_DATA + 4 * k, 0xDEAD_0000 + k)
        n += 1
    for slot in (0, 7, RTS_SLOTS - 1):
        await tb.host.write(RTS_CTRL, RTS_EXTEND | slot)
        await tb.host.write(RTS_CTRL, RTS_READ | slot)
        n += 2
    for a in (RTS_STATUS, RTS_DATA, RTS_DATA + 44):
        assert await tb.host.read(a) == 0, f"{what}: the host read {a:#x} as nonzero"
        n += 1
    for _ in range(GPU.rts_extend_cycles + 5):
        await RisingEdge(tb.clk)
    assert await dec_count(tb) == d0 + n, f"{what}: {await dec_count(tb) - d0} of the host's {n} RTS accesses refused"
    await check_slots(tb, slots_model, range(RTS_SLOTS), f"{what}: after the host's tries")


@cocotb.test()
async def rts_extend_read(dut):
    """Extends from the firmware port, read back through it; the host cannot reach the RTS."""
    tb = GpuTB(dut)
    await tb.power_on(Mode.ON)
    model = RtsModel(RTS_SLOTS)
    hist = {}
    plan = [(0, 1), (5, 4), (RTS_SLOTS - 1, 9), (0, 1), (5, 4), (0, 1), (33, 200)]
    for slot, owner in plan:
        value = random.randbytes(48)
        assert not await tb.rts_extend(slot, value, owner), f"extend of slot {slot} refused"
        model.extend(slot, owner, value)
        hist.setdefault(slot, []).append(value)
        got = await tb.rts_read(slot)
        assert got["value"] == chain(hist[slot]), f"slot {slot}: not the hashlib chain of its extends"
        assert (got["owner"], got["bound"], got["count"]) == (owner, 1, len(hist[slot])), f"slot {slot}: {got}"
    await check_slots(tb, model, range(RTS_SLOTS), "after the extends")
    assert await tb.rts_refused() == 0
    for mode in (Mode.ON, Mode.OFF, Mode.DEVTOOLS):
        if int(dut.mode.value) != mode.value:
            await tb.set_mode(mode)
        await host_cannot_touch(tb, model, f"{mode.name}")


@cocotb.test()
async def rts_owner_lock(dut):
    """A bound slot takes extends from its owner initiator only."""
    tb = GpuTB(dut)
    await tb.power_on(Mode.ON)
    model = RtsModel(RTS_SLOTS)
    slot = 7
    for owner in (1, 1):
        v = random.randbytes(48)
        assert not await tb.rts_extend(slot, v, owner)
        model.extend(slot, owner, v)
    before = await tb.rts_read(slot)
    for k, other in enumerate((2, 0, 255), 1):
        assert await tb.rts_extend(slot, random.randbytes(48), other), f"initiator {other} extended slot {slot}"
        assert await tb.rts_read(slot) == before, f"initiator {other}: slot {slot} changed"
        assert await tb.rts_refused() == k, f"RTS_REFUSED {await tb.rts_refused()}, not {k}"
    # the owner id is the bus's, not the data: initiator 2 writing the value words and
    # initiator 1 issuing the go extends as owner 1
    v = random.randbytes(48)
    dut.fw_id.value = 2
    for k in range(RTS_WORDS):
        await tb.fw.write(RTS_DATA + 4 * k, int.from_bytes(v[4 * k:4 * k + 4], "little"))
    dut.fw_id.value = 1
    await tb.fw.write(RTS_CTRL, RTS_EXTEND | slot)
    st = await tb.rts_wait()
    dut.fw_id.value = 0
    assert not st["refused"], "the owner's go was refused"
    model.extend(slot, 1, v)
    await check_slots(tb, model, [slot], "owner's extend after the refusals")
    # a free slot binds to whoever extends it first
    assert not await tb.rts_extend(8, v, 2)
    assert await tb.rts_extend(8, v, 1), "slot 8, bound to 2, took initiator 1's extend"


@cocotb.test()
async def rts_resets(dut):
    """FLR keeps the measurements; the cold reset scrubs them."""
    tb = GpuTB(dut)
    await tb.power_on(Mode.ON)
    model = RtsModel(RTS_SLOTS)
    for slot in random.sample(range(RTS_SLOTS), 6) + [RTS_SLOTS - 1]:
        v = random.randbytes(48)
        owner = random.randrange(1, 256)
        if model.read(slot).bound:
            owner = model.read(slot).owner
        assert not await tb.rts_extend(slot, v, owner)
        model.extend(slot, owner, v)
    assert await tb.rts_extend(RTS_SLOTS - 1, bytes(48), (model.read(RTS_SLOTS - 1).owner + 1) % 256)
    model.extend(RTS_SLOTS - 1, (model.read(RTS_SLOTS - 1).owner + 1) % 256, bytes(48))
    assert await tb.rts_refused() == 1
    await tb.flr()
    await check_slots(tb, model, range(RTS_SLOTS), "after an FLR")
    await tb.set_mode(Mode.DEVTOOLS)
    await check_slots(tb, model, range(RTS_SLOTS), "after the FLR into devtools")
    assert await tb.rts_refused() == 1, "the FLR cleared RTS_REFUSED"
    # cold reset: everything zero, unbound
    await tb.power_on(Mode.ON)
    st = await tb.rts_wait()
    assert st["ready"] == 1
    assert await tb.rts_refused() == 0, "RTS_REFUSED survived the cold reset"
    model.reset()
    await check_slots(tb, model, range(RTS_SLOTS), "after the cold reset")
    assert not await tb.rts_extend(RTS_SLOTS - 1, bytes(48), 77), "a formerly bound slot refused a new owner"


# ---------------------------------------------------------------------------- READY
async def desc_held(tb, cycles, what):
    """The descriptor offered now is not taken for *cycles* cycles, nothing moves."""
    await RisingEdge(tb.clk)          # the pokes of the descriptor's data land at this edge
    writes, reads, statuses = len(tb.writes), tb.reads, len(tb.statuses)
    dev = [tb.dev(a) for a in range(tb.PROT[1])]
    for _ in range(cycles):
        await ReadOnly()
        assert int(tb.dut.desc__valid.value), f"{what}: no descriptor offered"
        assert not int(tb.dut.desc__ready.value), f"{what}: a descriptor was taken without READY"
        assert not int(tb.dut.rd_req__valid.value) and not int(tb.dut.wr__valid.value), \
            f"{what}: host memory traffic without READY"
        await RisingEdge(tb.clk)
    assert (len(tb.writes), tb.reads, len(tb.statuses)) == (writes, reads, statuses), f"{what}: something moved"
    assert [tb.dev(a) for a in range(tb.PROT[1])] == dev, f"{what}: device memory changed"
    got = await tb.ready_reg()
    assert got == {"ready": 0, "held": 1}, f"{what}: GPU_READY {got}"
    assert await tb.ready_reg(tb.fw) == got, f"{what}: the firmware reads GPU_READY otherwise"


async def runs_after_ready(tb, key, d, pt, what):
    await tb.set_ready()
    assert await tb.ready_reg() == {"ready": 1, "held": 1}
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.OK, f"{what}: {tb.statuses[-1][1]}"
    assert HostChannel(key, d.ch, 0).open(read_frame(tb.mem, d.dst, d.len + 2)) == pt, f"{what}: frame"


@cocotb.test()
async def ready_gates_dma(dut):
    """DMA held before READY, runs after; FLR and mode changes clear READY; CC off ungated."""
    tb = GpuTB(dut, auto_ready=False)
    await tb.power_on(Mode.ON)
    assert await tb.ready_reg() == {"ready": 0, "held": 0}, "READY set at power-on"
    prot, bounce = Alloc(tb.PROT), Alloc(tb.BOUNCE)
    key = random.randbytes(32)
    # the firmware cannot set READY (its write is ignored)
    await tb.fw.write(GPU_READY, 1)
    assert (await tb.ready_reg())["ready"] == 0, "a firmware write set READY"
    for rnd, what in enumerate(("power-on", "FLR")):
        await tb.install(0, key, 0)
        d, pt = outbound(tb, prot, bounce, 0, random.randint(1, FRAME_BLOCKS), rnd)
        tb.submit(d)
        await desc_held(tb, 300, f"CC on after {what}")
        await runs_after_ready(tb, key, d, pt, f"CC on after {what}")
        tb.check()
        await tb.flr()
        assert await tb.ready_reg() == {"ready": 0, "held": 0}, "the FLR left READY set"
    # a mode write clears READY at once; a write of 1 is refused until the FLR applies it
    await tb.set_ready()
    assert (await tb.ready_reg())["ready"] == 1
    await tb.host.write(REG["CC_MODE_SET"], Mode.DEVTOOLS.value)
    assert (await tb.ready_reg())["ready"] == 0, "a mode write left READY set"
    await tb.set_ready()
    assert (await tb.ready_reg())["ready"] == 0, "READY set with a mode change pending"
    await tb.flr()
    assert int(dut.mode.value) == Mode.DEVTOOLS.value
    await tb.install(0, key, 0)
    d, pt = outbound(tb, prot, bounce, 0, 4, 9)
    tb.submit(d)
    await desc_held(tb, 100, "devtools")
    await runs_after_ready(tb, key, d, pt, "devtools")
    # the firmware's mode write (the other port) clears it as well
    await tb.fw.write(REG["CC_MODE_SET"], Mode.OFF.value)
    assert (await tb.ready_reg())["ready"] == 0, "the firmware's mode write left READY set"
    await tb.flr()
    assert int(dut.mode.value) == Mode.OFF.value
    # CC off: READY 0 and plain copies run
    assert (await tb.ready_reg())["ready"] == 0
    d, pt = outbound(tb, prot, bounce, 0, 5, 10)
    tb.submit(d)
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.OK and read_frame(tb.mem, d.dst, 5) == pt, \
        "CC off: READY gated the plain copy"
    assert (await tb.ready_reg())["held"] == 0
    tb.check()


# ---------------------------------------------------------------------------- the chain
@cocotb.test()
@cocotb.parametrize(mode=[Mode.ON, Mode.DEVTOOLS])
async def attested_session_flow(dut, mode):
    """RTMs → RTS (RTL) → RTR report → CVM verification → READY → DMA under the session keys."""
    tb = GpuTB(dut, auto_ready=False)
    await tb.power_on(mode)
    env = Env()                         # the device, RIM authority, RIMs, OCSP responder
    measured = await measured_boot(tb, env.firmware)
    assert measured == MODE_NAMES[mode.value]
    # ---- the RTR reads every slot through the RTL and answers the CVM -------------------
    slots = await tb.rts_read_all()
    values, counts = [s["value"] for s in slots], [s["count"] for s in slots]
    responder = Responder(env.device, lambda: values, extend_counts=lambda: counts)
    rng, nonces = recording_rng()
    requester = Requester(responder.handle, env.manufacturer.root, rng=rng)
    result = requester.run(h100_order=True)
    await install_session_keys(tb, responder.session_keys)
    report = result.report_request + result.report_response
    nonce = nonces[-1]                  # GET_MEASUREMENTS is the last request in H100's order
    # the CVM's policy: the default one, which refuses devtools, or one that accepts it
    policy = env.policy(allow_devtools=mode is Mode.DEVTOOLS)

    def verdict(report=report, driver_rim=env.driver_rim, vbios_rim=env.vbios_rim, policy=policy):
        try:
            return verify(report, requester.chain, driver_rim, vbios_rim, nonce=nonce, policy=policy,
                          vca=requester.vca)
        except AttestError as e:        # a report that does not parse: not verified either
            return e
    # ---- a report with one byte changed (a measurement, the opaque data, the signature)
    # fails the verifier, so the host does not set READY: the DMA stays refused
    rsp_at = len(result.report_request)
    for where in (report.index(env.firmware.golden("vbios")[min(env.firmware.golden("vbios"))][0])
                  + random.randrange(48), len(report) - SIG_BYTES - 1, len(report) - 1 - random.randrange(SIG_BYTES)):
        assert where >= rsp_at
        bad = bytearray(report)
        bad[where] ^= 1 << random.randrange(8)
        got = verdict(bytes(bad))
        assert isinstance(got, AttestError) or not got.ok, f"a report changed at byte {where} was accepted"
    # ... and so does checking it against the RIMs of another firmware build, and (in
    # devtools) the default policy, which refuses a GPU in devtools mode
    other = ModelledFirmware(b"r2")
    other_rims = [write_rim(product="GH100", version=getattr(other, f"{k}_version"), golden=other.golden(k),
                            signer=env.signer) for k in ("driver", "vbios")]
    got = verdict(driver_rim=other_rims[0], vbios_rim=other_rims[1])
    assert "measurements" in {f.name for f in got.failures}, f"another build's RIMs: {got.failures}"
    if mode is Mode.DEVTOOLS:
        got = verdict(policy=env.policy())
        assert "devtools" in {f.name for f in got.failures}, f"the default policy on devtools: {got.failures}"
    to_gpu = HostChannel(result.keys.request.key, 0)
    from_gpu = HostChannel(result.keys.response.key, 1)
    bounce, prot = Alloc(tb.BOUNCE), Alloc(tb.PROT)
    n = random.randint(1, FRAME_BLOCKS)
    data = random.randbytes(16 * n)
    src, dst = bounce.take(n + 2), prot.take(n)
    for j, b in enumerate(blocks(to_gpu.seal(data))):
        tb.poke(src + j, b)
    assert tb.submit(Desc(Dir.IN, 0, n, src, dst, 1)) is Status.OK
    await desc_held(tb, 200, "before verification")
    # ---- the good report passes: the RTL's slots, the mode claim ------------------------
    good = verdict()
    assert good.ok, f"the verifier refused the GPU's evidence: {good.failures}"
    assert [b.dmtf_value().value for b in result.measurements] == values
    claims = (good.claims["cc_mode"], good.claims["devtools"])
    assert claims == ("on", mode is Mode.DEVTOOLS), f"claims {claims} for {mode.name}"
    await tb.set_ready()
    await tb.drain()
    assert tb.statuses[-1][1]["code"] is Status.OK, f"IN under the session key: {tb.statuses[-1][1]}"
    out = bounce.take(n + 2)
    assert tb.submit(Desc(Dir.OUT, 1, n, dst, out, 2)) is Status.OK
    await tb.drain()
    frame = read_frame(tb.mem, out, n + 2)
    try:
        HostChannel(result.keys.request.key, 1).open(frame)
    except (FrameError, InvalidTag):
        pass
    else:
        raise AssertionError("an OUT frame opened under the request-direction key")
    assert from_gpu.open(frame) == data, "the CVM reads other bytes"
    tb.check()


def test_gpu_cc_rts():
    """pytest entry: this module's cocotb tests on ``gpu_cc``."""
    from tb.common.sim import run

    run("gpu_cc", "tb.cc.test_gpu_cc_rts")
