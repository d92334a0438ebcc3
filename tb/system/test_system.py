"""End-to-end checks of issue 6 on the RTL (``sxp_system``: SXP + pcie_rdtable).

The job (:class:`sw.itx.testing.Scenario`): four tiles (0, 1, 5, 1471) boot an encrypted
binary (the model provider's key, context 0), then at synchronisation point 1 the CCU
replaces that key by the data provider's and the tiles read a data stream (context 0),
fold it into their state and checkpoint it (this epoch's key, context 1); after a chip
reset a new run (epoch 2) boots again and restores the checkpoint (epoch 1's key, context
2). Expected values come from the plaintext the runtime encrypted and from cryptography's
AESGCM (inside the shim), never from the RTL. With the stand-in CCU
(:class:`sw.itx.testing.TrustedCcu`) the configuration goes over the host CSR port, keys
and trusted mode over the CCU port (:class:`sw.itx.csr.CsrKeyPort`); the real CCU model
writes the manifest's whole configuration over the CCU port itself, before it requests
trusted mode (a trusted SXP refuses configuration writes), and reads it back.

Each attack is its own test; each must be detected — an SXP security exception (irq,
STATUS.cause) or the tile's IV check — with no byte of the failing frame in tile memory.
The attacks on the code stream and on the key schedule run under the real CCU firmware
model (:class:`sw.itx.testing.CcuJob` on :class:`tb.system.env.RtlCcuPort`) and end
in its exception handler: it reads the cause over the RTL's ccu port (or takes the tile's
report), stops the job and holds the tiles. The checkpoint tests keep the stand-in
:class:`sw.itx.testing.TrustedCcu`, which plays the epoch keys of a resumed run.

The pytest entry runs every test on ``sxp_system`` (lanes 1, 16-byte beats) and on
``sxp_system_x4`` (lanes 4, 64-byte beats); the tests read the lanes off the DUT
(:func:`tb.system.env.lanes_of`) and build host memory and tiles to match. The job is small
(≈ 30 code frames of 512 B, 18 data frames of 384 B, 3 checkpoint frames per tile), so the
lanes-4 model, slow per cycle, runs it in modest simulated time.
"""
import dataclasses
import random
import re

import cocotb
import pytest
from cocotb.task import resume

from hw.sxp.regs import Cause as SxpCause
from sw.ccu.cce import ResumePoint, TeeState
from sw.ccu.errors import ApiOrderError, ManifestError, ManifestMismatchError, TrustedModeError
from sw.ccu.keypkg import NONCE_SIZE
from sw.ccu.manifest import ConfigWrite
from sw.ccu.sxp_port import ExceptionCause, ExceptionSource, SxpRegister
from sw.itx.frames import (
    StreamType,
    checkpoint_nonce,
    decrypt_stream,
    encrypt_stream,
    payload_bytes,
    stream_nonce,
)
from sw.itx.host import HostMemory
from sw.itx.runtime import CODE_BASE, DATA_BASE, STATE_BASE
from sw.itx.testing import CcuJob, Scenario, TrustedCcu
from sw.itx.tile import (
    Cause,
    SecurityException,
    application_measurement,
    check_measurement,
)
from tb.common.scrub import Scanner, gcm_key_secrets
from tb.common.sim import params
from tb.system.env import RtlCcuPort, SystemTB, lanes_of, run_ccu

PARAMS = params()
CONTEXTS = PARAMS.get("contexts", 16)
TILES = (0, 1, 5, 1471)
VICTIM, FRAME = 5, 2


def scenario(dut, seed, **kw):
    """The shared job (sw.itx.testing.Scenario) at the DUT's lanes."""
    lanes = lanes_of(dut)
    host = HostMemory(rng=random.Random(seed + 1000), latency=(1, 40), lanes=lanes)
    return Scenario(seed=seed, tiles=TILES, contexts=CONTEXTS, host=host, lanes=lanes, **kw)


async def setup(dut, sc, idle=0.1, stall=0.1):
    tb = SystemTB(dut, sc.tiles, sc.rt.host, CONTEXTS, idle=idle, stall=stall)
    sc.prepare(tb.tiles)
    await tb.start()
    return tb


async def launch(tb, sc, epoch=1, resume_epoch=None):
    """Host: SXP configuration over the host port. CCU: trusted mode, key set 0."""
    sc.rt.configure(tb.config_writer())
    await tb.host_csr.flush()
    sets, keys = sc.key_sets(epoch, resume_epoch)
    ccu = TrustedCcu(tb.key_port(), keys)
    ccu.launch(sets[0])
    await tb.ccu_csr.flush()
    st = await tb.ccu_csr.wait_trusted()
    assert st["trusted"] and not st["exc"], f"trusted mode not entered cleanly: {st}"
    return ccu, sets


def assert_loaded(sc, tile, frames):
    """*tile* holds its first *frames* code frames and not one byte of the next."""
    size = payload_bytes(sc.code[tile.id].frame_bytes)
    n = min(len(sc.binaries[tile.id]), frames * size)
    mem = tile.memory
    assert mem[CODE_BASE:CODE_BASE + n] == sc.binaries[tile.id][:n], \
        f"tile {tile.id}: the frames before the failing one are wrong"
    assert set(mem[CODE_BASE + n:CODE_BASE + n + size]) == {sc.SENTINEL}, \
        f"tile {tile.id}: a byte of the failing frame {frames} landed in tile memory"


async def expect_exception(tb, job, cause, sxp_cause=None):
    try:
        await tb.run(job)
    except SecurityException as e:
        assert e.cause == cause, f"detected as {e.cause} ({e}), expected {cause}"
    else:
        raise AssertionError("the attack went undetected")
    st = await tb.ccu_csr.status()
    if sxp_cause is None:
        assert not st["exc"], f"the SXP raised {SxpCause(st['cause']).name}; the IV check " \
                              f"should have caught this"
    else:
        assert st["exc"] and st["cause"] == sxp_cause.value, \
            f"SXP status {st}, expected cause {sxp_cause.name}"
    return st


def assert_data_landed(tb, sc, readers=None):
    """Each reader tile's data buffer holds its share of the data stream."""
    for t, sl in sc.data.readers.items():
        if readers is not None and t not in readers:
            continue
        size = payload_bytes(sl.frame_bytes)
        lo, hi = sl.first * size, min(len(sc.batch), (sl.first + sl.count) * size)
        assert tb.tiles[t].memory[DATA_BASE:DATA_BASE + hi - lo] == sc.batch[lo:hi], \
            f"tile {t}: data buffer differs from the data stream"


async def start_main(tb, ccu):
    """The bootloaders' measurement to the CCU model, which lets main execution start."""
    measured = application_measurement({t.id: t.digest for t in tb.tiles.values()})
    await run_ccu(lambda: ccu.cce.start_main(measured))


# ---- the job, start to end ---------------------------------------------------------------
async def boot(tb, sc):
    cycles = await tb.run(sc.rt.boot())
    for t in sc.tiles:
        assert tb.tiles[t].memory[:len(sc.binaries[t])] == sc.binaries[t], \
            f"tile {t}: memory differs from the plaintext binary"
    assert check_measurement(tb.tiles.values(), sc.rt.measurement())
    return cycles


@cocotb.test()
async def secure_boot(dut):
    """Secure boot onto 4 tiles; key change at sync point 1; a step reading a data stream
    of the other party; no exception, no read-table error (``make waves TEST=secure_boot``)."""
    await boot_and_step(dut, 0.1, 0.1)


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.4], stall=[0.0, 0.4])
async def secure_boot_flow_control(dut, idle, stall):
    """The same at full speed, with idle cycles on the inputs, with back-pressure on the
    outputs, and both."""
    await boot_and_step(dut, idle, stall)


async def boot_and_step(dut, idle, stall):
    sc = scenario(dut, 1)
    tb = await setup(dut, sc, idle, stall)
    ccu, sets = await launch(tb, sc)
    cycles = await boot(tb, sc)
    tb.log.info("boot of %d frames onto %d tiles: %d cycles", tb.frames, len(TILES), cycles)
    ccu.install(sets[1])                                   # synchronisation point 1
    await tb.ccu_csr.flush()
    await tb.run(sc.rt.step(sc.data))
    assert_data_landed(tb, sc)
    assert not tb.irq_seen and int(dut.rd_err_count.value) == 0


@cocotb.test()
async def checkpoint_resume(dut):
    """Checkpoint written by the tiles (encrypted by the SXP), then after a chip reset
    restored in epoch 2 under epoch 1's key: the restored state equals the saved one."""
    sc = scenario(dut, 2)
    tb = await setup(dut, sc)
    ccu, sets = await launch(tb, sc, epoch=1)
    await boot(tb, sc)
    ccu.install(sets[1])
    await tb.ccu_csr.flush()
    await tb.run(sc.rt.step(sc.data))
    states = {t: bytes(tb.tiles[t].memory[STATE_BASE:STATE_BASE + sc.STATE]) for t in TILES}
    assert all(any(s) for s in states.values())
    await tb.run(sc.rt.checkpoint(sc.plan))
    saved = sc.rt.save(sc.plan, epoch=1, checkpoint=0)
    for t in TILES:
        assert tb.tiles[t].checkpoint == 1 and tb.tiles[t].epoch == 1
        assert not sc.rt.host.contains(states[t][:16]), "plaintext state reached the host"
        # the SXP's encryption, checked with AESGCM: each frame opens under epoch 1's key
        # with the nonce (CHECKPOINT, epoch 1, id 0, ipu 0, tile, frame)
        nonce = lambda i, t=t: checkpoint_nonce(1, 0, 0, t, i)  # noqa: E731
        assert decrypt_stream(sc.epoch_keys[1], nonce, saved.blobs[t], sc.STATE,
                              saved.frame_bytes) == states[t], f"tile {t}: checkpoint frames"
    # ---- new run: chip reset, epoch 2 resumes from (epoch 1, checkpoint 0) ----
    new = scenario(dut, 2, epoch_keys=sc.epoch_keys)
    plan = new.rt.restore(saved, ctx=2)
    await tb.restart(new.rt.host, TILES)
    new.prepare(tb.tiles)
    for t in TILES:
        tb.tiles[t].epoch, tb.tiles[t].checkpoint = 1, 0   # assigned by the CCU
    await launch(tb, new, epoch=2, resume_epoch=1)
    await tb.run(new.rt.boot(resume=plan))
    for t in TILES:
        assert tb.tiles[t].memory[STATE_BASE:STATE_BASE + sc.STATE] == states[t], \
            f"tile {t}: restored state differs from the saved one"
        assert tb.tiles[t].epoch == 2
    assert not tb.irq_seen


@cocotb.test()
async def reads_and_writes_mixed(dut):
    """Two tiles read the data stream while two others write their checkpoints, with
    back-pressure on the host side: read requests (through the read table) and write
    packets share pcie_o; write packets must stay whole. The data lands, and every
    checkpoint frame opens with AESGCM under the epoch key."""
    sc = scenario(dut, 13)
    tb = await setup(dut, sc, idle=0.2, stall=0.5)
    ccu, sets = await launch(tb, sc)
    await boot(tb, sc)
    ccu.install(sets[1])
    await tb.ccu_csr.flush()
    states = {}
    for t in (5, 1471):
        states[t] = random.randbytes(sc.STATE)
        tb.tiles[t].memory[STATE_BASE:STATE_BASE + sc.STATE] = states[t]
    step, ckpt = sc.rt.step(sc.data, compute=False), sc.rt.checkpoint(sc.plan)
    await tb.run({0: step[0], 1: step[1], 5: ckpt[5], 1471: ckpt[1471]})
    assert_data_landed(tb, sc, readers=(0, 1))
    saved = sc.rt.save(sc.plan, epoch=1, checkpoint=0)
    for t in (5, 1471):
        nonce = lambda i, t=t: checkpoint_nonce(1, 0, 0, t, i)  # noqa: E731
        assert decrypt_stream(sc.epoch_keys[1], nonce, saved.blobs[t], sc.STATE,
                              saved.frame_bytes) == states[t], f"tile {t}: checkpoint frames"
    assert not tb.irq_seen and int(dut.rd_err_count.value) == 0


# ---- attacks on the code stream ----------------------------------------------------------
async def attack_boot(dut, sc, cause, sxp_cause=None):
    """Boot under the CCU model with a tampered code frame; detected (*cause*, SXP cause
    *sxp_cause*), the victim's earlier frames loaded and nothing of the bad one; then the
    CCU handles it (:func:`ccu_handles`)."""
    tb, ccu, _, _ = await ccu_launched(dut, sc, scan=False)
    await expect_exception(tb, sc.rt.boot(), cause, sxp_cause)
    victim = tb.tiles[VICTIM]
    assert victim.exception is not None, "the victim tile was not halted"
    assert_loaded(sc, victim, FRAME)
    await ccu_handles(tb, ccu, sxp_cause, TeeState.BOOTING)
    return tb


async def ccu_handles(tb, ccu, sxp_cause, state):
    """The CCU model handles the exception: an SXP one from its pin (``irq``) and cause
    record, read over its port; a tile's IV-check failure as the tile reports it (source
    TILE). It stops the job (*state* → STOPPED) and holds the tiles."""
    if sxp_cause is not None:
        await tb.until_high(tb.dut.irq, timeout=64)
        event = await run_ccu(lambda: ccu.cce.on_exception(time=tb.now))
        assert event is not None and event.cause.source is ExceptionSource.SXP and \
            event.cause.code == sxp_cause.value, f"the CCU read {event}, expected {sxp_cause.name}"
    else:
        report = ExceptionCause(ExceptionSource.TILE, tile=VICTIM)
        event = await run_ccu(lambda: ccu.cce.on_exception(report, time=tb.now))
    assert event.stopped and event.state is state, f"the CCU did not stop the job: {event}"
    assert ccu.cce.state is TeeState.STOPPED and tb.held, "job not stopped / tiles not held"


@cocotb.test()
async def flipped_ciphertext_bit(dut):
    sc = scenario(dut, 3)
    sc.flip(sc.frame_addr(VICTIM, FRAME), 16 + random.randrange(400), random.randrange(8))
    tb = await attack_boot(dut, sc, Cause.SXP_AUTH, SxpCause.AUTH)
    assert tb.tiles[VICTIM].frames_committed == FRAME


@cocotb.test()
async def flipped_tag_bit(dut):
    sc = scenario(dut, 4)
    n = sc.code[VICTIM].frame_bytes
    sc.flip(sc.frame_addr(VICTIM, FRAME), n - 16 + random.randrange(16), random.randrange(8))
    await attack_boot(dut, sc, Cause.SXP_AUTH, SxpCause.AUTH)


@cocotb.test()
async def flipped_iv_bit(dut):
    """A nonce bit: the frame decrypts under another counter and fails its tag. (A bit of
    the IV tail 00000001 makes the engine refuse the frame: FRAME.)"""
    sc = scenario(dut, 5)
    sc.flip(sc.frame_addr(VICTIM, FRAME), random.randrange(12), random.randrange(8))
    await attack_boot(dut, sc, Cause.SXP_AUTH, SxpCause.AUTH)


@cocotb.test()
async def flipped_iv_tail_bit(dut):
    sc = scenario(dut, 6)
    sc.flip(sc.frame_addr(VICTIM, FRAME), 12 + random.randrange(4), random.randrange(8))
    await attack_boot(dut, sc, Cause.SXP_AUTH, SxpCause.FRAME)


@cocotb.test()
async def replayed_frame(dut):
    """Frame 1 served again in slot 2: it authenticates, the tile's IV check refuses it."""
    sc = scenario(dut, 7)
    n = sc.code[VICTIM].frame_bytes
    sc.rt.host.write(sc.frame_addr(VICTIM, FRAME), sc.rt.host.read(sc.frame_addr(VICTIM, FRAME - 1), n))
    tb = await attack_boot(dut, sc, Cause.IV_MISMATCH)
    assert tb.tiles[VICTIM].frames_committed == FRAME + 1


@cocotb.test()
async def reordered_frames(dut):
    sc = scenario(dut, 8)
    n = sc.code[VICTIM].frame_bytes
    a, b = sc.frame_addr(VICTIM, FRAME), sc.frame_addr(VICTIM, FRAME + 1)
    fa, fb = sc.rt.host.read(a, n), sc.rt.host.read(b, n)
    sc.rt.host.write(a, fb)
    sc.rt.host.write(b, fa)
    await attack_boot(dut, sc, Cause.IV_MISMATCH)


@cocotb.test()
async def frame_from_another_stream(dut):
    """Tile 0's frame 2 (same key, another code stream) in the victim's slot 2."""
    sc = scenario(dut, 9)
    n = sc.code[VICTIM].frame_bytes
    sc.rt.host.write(sc.frame_addr(VICTIM, FRAME), sc.rt.host.read(sc.frame_addr(0, FRAME), n))
    await attack_boot(dut, sc, Cause.IV_MISMATCH)


@cocotb.test()
async def frame_under_another_partys_key(dut):
    """The expected nonce, but encrypted under the data provider's key."""
    sc = scenario(dut, 10)
    s = sc.code[VICTIM]
    frame = encrypt_stream(sc.data_key, lambda i: stream_nonce(StreamType.CODE, s.id, FRAME),
                           random.randbytes(100), s.frame_bytes)
    sc.rt.host.write(sc.frame_addr(VICTIM, FRAME), frame)
    await attack_boot(dut, sc, Cause.SXP_AUTH, SxpCause.AUTH)


# ---- attacks on the key schedule and on checkpoints --------------------------------------
@cocotb.test()
async def host_ignores_key_schedule(dut):
    """The runtime never asks for key set 1: the data frames meet the code key in context
    0 and fail authentication (denial of service); no data byte lands, none leaks."""
    sc = scenario(dut, 11)
    tb, ccu, _, _ = await ccu_launched(dut, sc, scan=False)
    await boot(tb, sc)
    await start_main(tb, ccu)
    await expect_exception(tb, sc.rt.step(sc.data), Cause.SXP_AUTH, SxpCause.AUTH)
    await ccu_handles(tb, ccu, SxpCause.AUTH, TeeState.RUNNING)
    for t in TILES:
        assert set(tb.tiles[t].memory[DATA_BASE:DATA_BASE + 512]) == {sc.SENTINEL}, \
            f"tile {t}: a data byte landed"
    assert not sc.rt.host.contains(sc.batch[:16])


@cocotb.test()
async def checkpoint_from_another_epoch(dut):
    """A run must resume from the checkpoint of epoch 1; the host serves the one written
    in epoch 0 (an older state, under that run's key). Both runs are the CCU model's: the
    resumed run's key is derived from the parties' resume nonces for epoch 1, so the SXP
    rejects the old checkpoint (AUTH), nothing lands, and the CCU stops the job."""
    sc = scenario(dut, 12)
    tb, ccu, _, _ = await ccu_launched(dut, sc, scan=False)
    await boot(tb, sc)
    await start_main(tb, ccu)
    for t in TILES:
        tb.tiles[t].memory[STATE_BASE:STATE_BASE + sc.STATE] = random.randbytes(sc.STATE)
    await tb.run(sc.rt.checkpoint(sc.plan))
    saved = sc.rt.save(sc.plan, epoch=1, checkpoint=0)
    await run_ccu(ccu.cce.terminate)
    # ---- chip reset; a run that resumes from epoch 1 is served epoch 0's checkpoint ----
    new = scenario(dut, 12)
    plan = new.rt.restore(saved, ctx=2)
    await tb.restart(new.rt.host, TILES)
    new.prepare(tb.tiles)
    for t in TILES:
        tb.tiles[t].epoch, tb.tiles[t].checkpoint = 2, 0
        tb.tiles[t].memory[STATE_BASE:STATE_BASE + new.STATE] = bytes([new.SENTINEL]) * new.STATE
    new.rt.configure(tb.config_writer())
    await tb.host_csr.flush()
    job = CcuJob(new, RtlCcuPort(tb), resume_ctx=2)
    await run_ccu(lambda: job.launch(resume=ResumePoint(epoch=1, checkpoint_id=0),
                                     resume_nonce=random.randbytes(NONCE_SIZE)))
    await expect_exception(tb, new.rt.boot(resume=plan), Cause.SXP_AUTH, SxpCause.AUTH)
    for t in TILES:
        assert set(tb.tiles[t].memory[STATE_BASE:STATE_BASE + new.STATE]) == {new.SENTINEL}, \
            f"tile {t}: a checkpoint byte landed"
    await ccu_handles(tb, job, SxpCause.AUTH, TeeState.BOOTING)


# ---- the CCU firmware model on the RTL ----------------------------------------------------
async def ccu_launched(dut, sc, idle=0.1, stall=0.1, make_tb=setup, make_port=RtlCcuPort,
                       skip=(), scan=True):
    """The real CCU model (sw.ccu, :class:`sw.itx.testing.CcuJob`) on the RTL's ccu port,
    from the reset configuration: the CCU creates the TEE (the manifest's configuration
    written, trusted mode entered, bit and configuration read back), attests, unwraps both
    parties' packages and launches. The scan baseline is taken
    before any key enters (*scan*: else no scanner). *make_tb* / *make_port* build the
    testbench and the CCU's port (itx_device has its own); *skip*: more input ports the scan
    leaves out."""
    tb = await make_tb(dut, sc, idle, stall)
    scanner = Scanner(dut, ("xb_i__", "pcie_i__", "ccu__", "host__") + tuple(skip)) if scan else None
    if scan:
        scanner.baseline()
    await tb.cycles(1)          # out of the scan's ReadOnly phase: a port's bus drives its inputs
    port = make_port(tb)
    ccu = CcuJob(sc, port)
    await run_ccu(ccu.launch)
    st = await tb.ccu_csr.status()
    assert st["trusted"] and not st["exc"], f"the CCU's launch left STATUS {st}"
    assert ccu.cce.state is TeeState.BOOTING and port.installed, "launch installed no key"
    if scan:    # positive control: the same scan finds the keys the CCU just installed
        await tb.cycles(32)
        found = {h.kind for h in scanner.find([s for key in port.installed
                                               for s in gcm_key_secrets(key, tb.lanes)])}
        assert found, "control: the scan finds no installed key in the live SXP"
    return tb, ccu, port, scanner


async def assert_no_key_left(tb, port, scanner, what):
    """No window of any key the CCU installed, of its round keys or of H..H^lanes is in
    any signal or memory of the RTL (after the zero-key installs have left the pipeline)."""
    await tb.cycles(64)
    secrets = [s for key in port.installed for s in gcm_key_secrets(key, tb.lanes)]
    scanner.assert_clean(secrets, what)


@cocotb.test()
async def ccu_firmware_lifecycle(dut):
    """The CCU firmware model drives the RTL through a whole job: launch (trusted mode read
    back), secure boot, the bootloader's measurement checked by the CCU before main
    execution, the key change at the synchronisation point, a data step, a checkpoint
    under the CCU-derived key, terminate; then no key is left in the SXP."""
    sc = scenario(dut, 31)
    tb, ccu, port, scanner = await ccu_launched(dut, sc)
    await boot(tb, sc)
    await start_main(tb, ccu)
    assert ccu.cce.state is TeeState.RUNNING
    await run_ccu(ccu.cce.next_key_set)                    # synchronisation point 1
    await tb.run(sc.rt.step(sc.data))
    assert_data_landed(tb, sc)
    await tb.run(sc.rt.checkpoint(sc.plan))                 # under the derived key
    saved = sc.rt.save(sc.plan, epoch=1, checkpoint=0)
    assert len(port.installed) == 3, "expected the code, checkpoint and data keys"
    ckpt_key = port.installed[1]
    for t in TILES:
        nonce = lambda i, t=t: checkpoint_nonce(1, 0, 0, t, i)  # noqa: E731
        state = bytes(tb.tiles[t].memory[STATE_BASE:STATE_BASE + sc.STATE])
        assert decrypt_stream(ckpt_key, nonce, saved.blobs[t], sc.STATE,
                              saved.frame_bytes) == state, f"tile {t}: checkpoint frames"
    assert not tb.irq_seen and ccu.cce.exception_log == ()
    await run_ccu(ccu.cce.terminate)
    assert ccu.cce.state is TeeState.TERMINATED
    await assert_no_key_left(tb, port, scanner, "after terminate")


@cocotb.test()
async def ccu_handles_an_attack(dut):
    """A flipped ciphertext bit in the victim's code frame: the SXP raises its exception
    (irq, the CCU's pin); the CCU model reads the cause record over the RTL's ccu port
    (AUTH, the victim tile, an address inside the frame), acknowledges it, holds the
    tiles, zeroes the contexts it loaded — no key is left in the SXP — and refuses to go
    on; main execution never starts. Frames in flight on the zeroed contexts fail too:
    their events are logged without a second stop, and once they are acknowledged the pin
    stays low."""
    sc = scenario(dut, 32)
    addr = sc.frame_addr(VICTIM, FRAME)
    sc.flip(addr, 16 + random.randrange(400), random.randrange(8))
    tb, ccu, port, scanner = await ccu_launched(dut, sc)
    try:
        await tb.run(sc.rt.boot())
    except SecurityException as e:
        assert e.cause == Cause.SXP_AUTH, f"detected as {e.cause}, expected the SXP's AUTH"
    else:
        raise AssertionError("the flipped frame went undetected")
    # the tile may halt on the zeroed tag slot a cycle or two before the SXP latches AUTH
    await tb.until_high(dut.irq, timeout=32)                # the CCU's pin
    event = await run_ccu(lambda: ccu.cce.on_exception(time=tb.now))
    assert event is not None and event.stopped and event.state is TeeState.BOOTING
    cause = event.cause
    assert cause.source is ExceptionSource.SXP and cause.code == SxpCause.AUTH.value, cause
    assert cause.tile == VICTIM, f"cause record names tile {cause.tile}, not {VICTIM}"
    n = sc.code[VICTIM].frame_bytes
    assert addr <= cause.address < addr + n, f"cause address {cause.address:#x} outside the frame"
    # Frames still in flight on the zeroed contexts now fail too and raise the pin again:
    # each later event is read, acknowledged and only logged (the job is already stopped).
    await tb.cycles(400)
    for _ in range(16):
        if not int(dut.irq.value):
            break
        later = await run_ccu(lambda: ccu.cce.on_exception(time=tb.now))
        assert later is not None and not later.stopped, f"a later event: {later}"
        await tb.cycles(4)
    assert int(dut.irq.value) == 0, "the CCU's acknowledges did not clear the pin"
    assert ccu.cce.exception_log[0] == event
    assert tb.held and ccu.cce.state is TeeState.STOPPED
    assert_loaded(sc, tb.tiles[VICTIM], FRAME)
    try:
        await run_ccu(lambda: ccu.cce.start_main(sc.rt.measurement()))
    except ApiOrderError:                                   # refused in STOPPED
        pass
    else:
        raise AssertionError("start_main went on after the CCU stopped the job")
    await assert_no_key_left(tb, port, scanner, "after the CCU's exception handler")


def with_config(manifest, *writes):
    """*manifest* with *writes* ((register, index, value)) replacing those entries."""
    named = {(r, i) for r, i, _ in writes}
    return dataclasses.replace(manifest, sxp_config=tuple(
        c for c in manifest.sxp_config if (c.register, c.index) not in named) + tuple(
        ConfigWrite(*w) for w in writes))


BAD_CONFIGS = (
    (((SxpRegister.KPHYSMAP, 1, 1),), "both map to region 1"),
    (((SxpRegister.KSELLIMIT_BASE, 0, 0), (SxpRegister.KSELLIMIT_LIMIT, 0, 1 << 31)),
     r"region 0 .* overlaps region 1 .*cleartext"),
    (((SxpRegister.KSELLIMIT_BASE, 1, (1 << 32) + 0x1000_0000),), "does not fit .* 32 bits"),
)


@cocotb.test()
async def ccu_checks_the_configuration(dut):
    """The CCU on the RTL's ccu port refuses three flawed manifests (two contexts on one
    region, a cleartext region over the key regions, a 64-bit region base) with
    ManifestError before a single CSR operation; the SXP stays untrusted with no exception.
    Then the host writes in the window between the CCU's last configuration write and its
    trust request: context 1 onto context 0's region — the SXP refuses (CONFIG), the CCU
    raises TrustedModeError and stays READY; on the next try a cleartext region 0 disjoint
    from the key regions — the SXP accepts, the CCU reads the configuration back over the
    ccu port, and both parties reject the report."""
    sc = scenario(dut, 33)
    tb = await setup(dut, sc)
    port = RtlCcuPort(tb)
    job = CcuJob(sc, port)
    certs = [cert for _, cert in job.ids.values()]
    for writes, match in BAD_CONFIGS:
        bad = with_config(job.job, *writes)
        try:
            await run_ccu(lambda bad=bad: job.cce.create_tee(bad, certs))
        except ManifestError as e:
            assert re.search(match, str(e)), f"refused for another reason: {e}"
        else:
            raise AssertionError(f"create_tee accepted {writes}")
        assert port.writes == port.reads == 0, f"{writes}: the port saw {port.writes} writes"
    st = await tb.ccu_csr.status()
    assert not st["trusted"] and not st["exc"], st
    assert job.cce.state is TeeState.READY

    top = max(c.value for c in job.job.sxp_config if c.register is SxpRegister.KSELLIMIT_LIMIT)
    request = port.set_trusted_mode
    host_write = resume(tb.host_csr.write_now)
    race = []

    def racing_host():
        for addr, value in race:
            host_write(addr, value)
        request()
    port.set_trusted_mode = racing_host

    # the host maps context 1 onto context 0's region: the SXP refuses trusted mode
    # (CONFIG), the CCU raises TrustedModeError and creates nothing
    race[:] = [(tb.regmap["KPHYSMAP1"].addr, 1)]
    try:
        await run_ccu(lambda: job.cce.create_tee(job.job, certs))
    except TrustedModeError as e:
        assert "refused trusted mode" in str(e), e
    else:
        raise AssertionError("create_tee went on after the SXP refused trusted mode")
    st = await tb.ccu_csr.status()
    assert not st["trusted"] and st["exc"] and st["cause"] == SxpCause.CONFIG.value, st
    assert job.cce.state is TeeState.READY
    event = await run_ccu(job.cce.on_exception)
    assert event.cause.code == SxpCause.CONFIG.value and not event.stopped, event

    # the host adds a disjoint cleartext region instead: trusted, but attested as read
    race[:] = [(tb.regmap["KSEL_BASE0"].addr, top), (tb.regmap["KSEL_LIMIT0"].addr, top + 0x1000)]
    await run_ccu(lambda: job.cce.create_tee(job.job, certs))
    st = await tb.ccu_csr.status()
    assert st["trusted"] and not st["exc"], st
    assert await tb.ccu_csr.read(tb.regmap["KSEL_LIMIT0"].addr) == top + 0x1000
    evidence = job.cce.get_attestation_report()
    for party in job.parties.values():
        try:
            party.verify(evidence)
        except ManifestMismatchError as e:
            assert "manifest hash" in str(e), e
        else:
            raise AssertionError("a party accepted a report over the host's configuration")


# ---- pytest entry ---------------------------------------------------------------------------
@pytest.mark.parametrize("design", ["sxp_system", "sxp_system_x4"])
def test_sxp_system(design):
    """The whole regression on one build per lanes (1 and 4): 4 physical contexts, 16
    read-table entries."""
    from tb.common.sim import run

    run(design, "tb.system.test_system", params={"contexts": 4, "entries": 16})


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_parameters_rejected():
    """Bad parameters of SxpSystem: TypeError for a non-int, ValueError (from the blocks
    it assembles) for a value out of range. The half-built systems (and the blocks built
    before the refusal) are reference cycles, never elaborated: collected here, their
    UnusedElaboratable warnings fall inside the filter instead of at interpreter exit."""
    import gc

    from hw.top import SxpSystem
    for bad, exc in (({"contexts": 0}, ValueError), ({"contexts": 17}, ValueError),
                     ({"contexts": "4"}, TypeError), ({"entries": 1}, ValueError),
                     ({"lanes": 3}, ValueError), ({"lanes": True}, TypeError),
                     ({"rcb": 32}, ValueError)):
        with pytest.raises(exc):
            SxpSystem(**bad)
    gc.collect()
