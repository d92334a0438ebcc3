"""Tile model and host shim end to end on an SXP path:
secure boot, measurement, data streams with a key change, checkpoint and resume, and each
attack the issue lists, each detected with no byte of the failing frame accepted — on the
reference device (cryptography) and on the SXP golden model (sw.sxp.model)."""
import random

import pytest

from hw.sxp.packet import Kind
from sw.itx.csr import CsrConfigWriter, CsrKeyPort
from sw.itx.frames import StreamType, encrypt_stream, payload_bytes, stream_nonce
from sw.itx.runtime import CODE_BASE, DATA_BASE, STATE_BASE
from sw.itx.testing import GoldenDevice, ReferenceDevice, Scenario, TrustedCcu
from sw.itx.tile import (
    Cause,
    Read,
    SecurityException,
    StreamSlice,
    Tile,
    Write,
    bootloader,
    check_measurement,
    clear_loader,
    write_packets,
)
from sw.pcie.beats import Beat, header

SENTINEL = Scenario.SENTINEL
TILES = (0, 1, 5, 1471)
STATE = Scenario.STATE


class App(Scenario):
    """The shared scenario on the reference device (cryptography) or on the SXP golden
    model (sw.sxp.model, reached through its CSR ports only)."""

    def __init__(self, seed=0, epoch_keys=None, device=("reference", 1), **kw):
        self.device, lanes = device
        super().__init__(seed=seed, epoch_keys=epoch_keys, lanes=lanes, **kw)
        if self.device == "golden":
            self.dev = GoldenDevice(self.tiles, host=self.rt.host)
        else:
            self.dev = ReferenceDevice(self.tiles, host=self.rt.host)
        self.prepare(self.dev.tiles)

    def launch(self, epoch=1, resume_epoch=None):
        """Configure over the host port, then the CCU: trusted mode, key set 0 (+ checkpoint
        key of this epoch on ctx 1, of the resumed epoch on ctx 2)."""
        self.sets, keys = self.key_sets(epoch, resume_epoch)
        if self.device == "golden":
            self.rt.configure(CsrConfigWriter(self.dev.host_csr))
            self.ccu = TrustedCcu(CsrKeyPort(self.dev.ccu_csr), keys)
        else:
            self.rt.configure(self.dev.sxp.host_write)
            self.ccu = TrustedCcu(self.dev.sxp, keys)
        self.ccu.launch(self.sets[0])
        if self.device == "golden":
            assert self.dev.model.trusted and not self.dev.model.exc

    def tile(self, t):
        return self.dev.tiles[t]


@pytest.fixture(params=[(d, lanes) for lanes in (1, 4) for d in ("reference", "golden")],
                ids=lambda p: f"{p[0]}-x{p[1]}")
def device(request):
    """(device, lanes): the reference or the golden-model SXP path, at lanes 1 and 4."""
    return request.param


def _assert_loaded(app, t, frames):
    """Tile t holds exactly its first *frames* code frames; the rest is untouched."""
    size = payload_bytes(app.code[t].frame_bytes)
    n = min(len(app.binaries[t]), frames * size)
    mem = app.tile(t).memory
    assert mem[CODE_BASE:CODE_BASE + n] == app.binaries[t][:n], f"tile {t}: accepted frames wrong"
    assert set(mem[CODE_BASE + n:CODE_BASE + n + size]) == {SENTINEL}, \
        f"tile {t}: a byte of frame {frames} (the failing one) landed in tile memory"


def test_secure_boot_step_checkpoint_resume(device):
    app = App(device=device, seed=1)
    app.launch(epoch=1)
    app.dev.run(app.rt.boot())
    for t in TILES:
        assert app.tile(t).memory[:len(app.binaries[t])] == app.binaries[t]
        assert app.tile(t).epoch == 1          # fresh start: epoch counter 0 -> 1
    assert check_measurement(app.dev.tiles.values(), app.rt.measurement())
    # sync point 1: the CCU replaces the code key in context 0 by the data key
    app.ccu.install(app.sets[1])
    app.dev.run(app.rt.step(app.data))
    for t, sl in app.data.readers.items():
        size = payload_bytes(sl.frame_bytes)
        lo = sl.first * size
        hi = min(len(app.batch), (sl.first + sl.count) * size)
        assert app.tile(t).memory[DATA_BASE:DATA_BASE + hi - lo] == app.batch[lo:hi]
    states = {t: bytes(app.tile(t).memory[STATE_BASE:STATE_BASE + STATE]) for t in TILES}
    assert any(states.values())
    plan = app.plan
    app.dev.run(app.rt.checkpoint(plan))
    assert all(app.tile(t).checkpoint == 1 for t in TILES)
    saved = app.rt.save(plan, epoch=1, checkpoint=0)
    for t in TILES:   # host sees only ciphertext
        assert not app.rt.host.contains(states[t][:32]) or not any(states[t][:32])
    # ---- a new run: epoch 2 resumes from (epoch 1, checkpoint 0) -----------------------
    new = App(device=device, seed=1, epoch_keys=app.epoch_keys)
    plan2 = new.rt.restore(saved, ctx=2)
    new.launch(epoch=2, resume_epoch=1)
    for t in TILES:
        new.tile(t).epoch, new.tile(t).checkpoint = 1, 0      # the CCU assigns these
    new.dev.run(new.rt.boot(resume=plan2))
    for t in TILES:
        assert new.tile(t).memory[STATE_BASE:STATE_BASE + STATE] == states[t], \
            f"tile {t}: restored state differs from the saved one"
        assert new.tile(t).epoch == 2


def test_measurement_mismatch_is_a_security_exception(device):
    app = App(device=device, seed=2)
    app.launch()
    app.dev.run(app.rt.boot())
    with pytest.raises(SecurityException) as e:
        check_measurement(app.dev.tiles.values(), bytes(48))
    assert e.value.cause == Cause.MEASUREMENT
    app.tile(TILES[0]).memory[0] ^= 1          # a binary that differs gives another hash
    bad = App(device=device, seed=2)
    bad.binaries[TILES[0]] = bytes([bad.binaries[TILES[0]][0] ^ 1]) + bad.binaries[TILES[0]][1:]
    bad.rt.binaries[TILES[0]] = bad.binaries[TILES[0]]
    with pytest.raises(SecurityException):
        check_measurement(app.dev.tiles.values(), bad.rt.measurement())



VICTIM, FRAME = 5, 2


def _attack_boot(app, cause):
    app.launch()
    with pytest.raises(SecurityException) as e:
        app.dev.run(app.rt.boot())
    assert e.value.cause == cause, f"detected as {e.value.cause}, expected {cause}"
    assert app.tile(VICTIM).exception is not None
    _assert_loaded(app, VICTIM, FRAME)     # frames before the bad one, nothing of it


@pytest.mark.parametrize("where", ["ciphertext", "tag", "iv", "iv_tail"])
def test_flipped_bit(where, device):
    app = App(device=device, seed=3)
    byte = {"ciphertext": 100, "tag": app.code[VICTIM].frame_bytes - 3, "iv": 5, "iv_tail": 15}
    app.flip(app.frame_addr(VICTIM, FRAME), byte[where], 6)
    _attack_boot(app, Cause.SXP_AUTH)
    assert app.tile(VICTIM).frames_committed == FRAME      # the SXP stopped it


def test_replayed_frame(device):
    app = App(device=device, seed=4)
    f = app.rt.host.read(app.frame_addr(VICTIM, FRAME - 1), app.code[VICTIM].frame_bytes)
    app.rt.host.write(app.frame_addr(VICTIM, FRAME), f)
    _attack_boot(app, Cause.IV_MISMATCH)
    assert app.tile(VICTIM).frames_committed == FRAME + 1   # authenticated, then refused


def test_reordered_frames(device):
    app = App(device=device, seed=5)
    n = app.code[VICTIM].frame_bytes
    a, b = app.frame_addr(VICTIM, FRAME), app.frame_addr(VICTIM, FRAME + 1)
    fa, fb = app.rt.host.read(a, n), app.rt.host.read(b, n)
    app.rt.host.write(a, fb)
    app.rt.host.write(b, fa)
    _attack_boot(app, Cause.IV_MISMATCH)


def test_frame_from_another_stream(device):
    app = App(device=device, seed=6)
    other = 0    # tile 0's code stream: same key, other stream id
    f = app.rt.host.read(app.frame_addr(other, FRAME), app.code[other].frame_bytes)
    app.rt.host.write(app.frame_addr(VICTIM, FRAME), f)
    _attack_boot(app, Cause.IV_MISMATCH)


def test_frame_under_another_partys_key(device):
    app = App(device=device, seed=7)
    # the data provider's key, the right nonce: only the key is wrong
    nonce = lambda i: stream_nonce(StreamType.CODE, app.code[VICTIM].id, FRAME)  # noqa: E731
    f = encrypt_stream(app.data_key, nonce, b"evil" * 40, app.code[VICTIM].frame_bytes)
    app.rt.host.write(app.frame_addr(VICTIM, FRAME), f)
    _attack_boot(app, Cause.SXP_AUTH)


def test_host_ignores_key_schedule(device):
    """No key change at the sync point: the data frames fail authentication under the code
    key (denial of service); nothing of the data reaches a tile or leaks."""
    app = App(device=device, seed=8)
    app.launch()
    app.dev.run(app.rt.boot())
    with pytest.raises(SecurityException) as e:
        app.dev.run(app.rt.step(app.data))          # app.ccu.install(app.sets[1]) skipped
    assert e.value.cause == Cause.SXP_AUTH
    for t in TILES:
        assert set(app.tile(t).memory[DATA_BASE:DATA_BASE + 512]) == {SENTINEL}
    assert not app.rt.host.contains(app.batch[:16])


def _checkpointed(seed, device, epoch_keys=None):
    app = App(device=device, seed=seed, epoch_keys=epoch_keys)
    plan = app.plan
    app.launch(epoch=1)
    app.dev.run(app.rt.boot())
    for t in TILES:
        app.tile(t).memory[STATE_BASE:STATE_BASE + STATE] = app.rng.randbytes(STATE)
    app.dev.run(app.rt.checkpoint(plan))
    return app, app.rt.save(plan, 1, 0)


@pytest.mark.parametrize("same_key", [False, True])
def test_checkpoint_from_another_epoch(same_key, device):
    """Resume must read (epoch 1, id 0); the host serves a checkpoint of another epoch. With
    per-epoch keys (the CCU's scheme) the SXP rejects it; even under the same key the
    tile's IV check does (the nonce names the epoch)."""
    old, saved_other = _checkpointed(9, device)                  # written in epoch 1 ...
    keys = dict(old.epoch_keys)
    if same_key:
        keys[2] = keys[1]
    new = App(device=device, seed=9, epoch_keys=keys)
    plan = new.rt.restore(saved_other, ctx=2)
    new.launch(epoch=3, resume_epoch=2)                  # ... but epoch 2's is expected
    for t in TILES:
        new.tile(t).epoch, new.tile(t).checkpoint = 2, 0
        new.tile(t).memory[STATE_BASE:STATE_BASE + STATE] = bytes([SENTINEL]) * STATE
    with pytest.raises(SecurityException) as e:
        new.dev.run(new.rt.boot(resume=plan))
    assert e.value.cause == (Cause.IV_MISMATCH if same_key else Cause.SXP_AUTH)
    for t in TILES:
        assert set(new.tile(t).memory[STATE_BASE:STATE_BASE + STATE]) == {SENTINEL}


@pytest.mark.parametrize("lanes", [1, 4])
def test_staging_holds_bytes_until_commit(lanes):
    """Direct tile unit: completions (beats of 16·lanes bytes) land in staging; memory
    changes only after commit, and a security exception drops the staged frame."""
    bb = 16 * lanes
    for verdict in ("commit", "exception", "zero tag slot"):
        tile = Tile(3, lanes=lanes)
        sl = StreamSlice(StreamType.CODE, 9, 0x1000_0000, 128, 96, 0)
        tile.run(bootloader(tile, sl))
        req = tile.outbox.popleft()[0].hdr
        assert req["kind"] == Kind.READ_REQ.value and req["length"] == 128 and req["aes"] == 1
        tag = bytes(16) if verdict == "zero tag slot" else b"\x17" * 16
        frame = stream_nonce(StreamType.CODE, 9, 0) + b"\0\0\0\1" + b"\x42" * 96 + tag
        for off in (0, 64):
            chunk = frame[off:off + 64]
            pkt = [Beat(int.from_bytes(chunk[k:k + bb], "little"),
                        header(kind=Kind.READ_CPL, tile=3, addr=0x1000_0000 + off, length=64,
                               aes=1, cc=int(off == 64)), int(k == 0), int(k + bb == 64))
                   for k in range(0, 64, bb)]
            done = tile.deliver(pkt)
        if verdict == "zero tag slot":      # the SXP's in-band refusal: halt, nothing lands
            assert not done and tile.exception.cause == Cause.SXP_AUTH
            assert tile.memory[:96] == bytes(96) and tile.digest is None
            continue
        assert done and tile.memory[:96] == bytes(96), "nothing lands before the verdict"
        if verdict == "commit":
            tile.commit()
            assert tile.memory[:96] == b"\x42" * 96 and not tile.busy and tile.digest
        else:
            tile.security_exception()
            assert tile.memory[:96] == bytes(96) and tile.exception.cause == Cause.SXP_AUTH
            assert tile.digest is None


@pytest.mark.parametrize("lanes", [1, 4])
def test_write_packets_on_beats(lanes):
    """A checkpoint frame leaves as ≤ 256-byte write packets of whole 16·lanes-byte beats,
    ``aes`` on all, ``cc`` on the last, the bytes in lane order."""
    frame = bytes(range(256)) * 3 + bytes(range(128))          # 896 bytes = 7 × 128
    packets = write_packets(7, Write(0x1000_0400, frame, 2), lanes)
    bb = 16 * lanes
    assert [p[0].hdr["length"] for p in packets] == [256, 256, 256, 128]
    assert [p[0].hdr["cc"] for p in packets] == [0, 0, 0, 1]
    got = b""
    for p in packets:
        h = p[0].hdr
        assert h["addr"] % bb == 0 and len(p) == h["length"] // bb and h["aes"] == 1
        assert [b.first for b in p] == [1] + [0] * (len(p) - 1) and p[-1].last == 1
        got += b"".join(b.data.to_bytes(bb, "little") for b in p)
    assert got == frame


def test_unaligned_access_refused_at_lanes_4():
    """At lanes 4 a read or write off the 64-byte beat would be dropped by the SXP; the
    tile refuses to issue it (a runtime layout bug, not an attack)."""
    for action in (Read(0x1000_0020, 128, 0), Read(0x1000_0000, 96, 0),
                   Write(0x1000_0010, bytes(128), 0)):
        tile = Tile(1, lanes=4)
        with pytest.raises(ValueError):
            tile.run(a for a in [action])
    Tile(1, lanes=1).run(a for a in [Read(0x1000_0020, 96, 0)])   # fine on 16-byte beats
    with pytest.raises(ValueError):
        Tile(1, lanes=3)


def test_unexpected_completion_halts_tile():
    tile = Tile(1)
    tile.run((yield_ for yield_ in [Read(0x1000_0000, 128, 0)]))
    pkt = [Beat(0, header(kind=Kind.READ_CPL, tile=1, addr=0x1000_0040, length=16, cc=1), 1, 1)]
    tile.deliver(pkt)
    assert tile.exception.cause == Cause.PROTOCOL


def test_host_config_locked_in_trusted_mode(device):
    app = App(device=device, seed=10)
    app.launch()
    if app.device == "golden":                     # the host tries again after launch
        before = {r: app.dev.model.region(r) for r in range(17)}
        app.rt.configure(CsrConfigWriter(lambda a, v: app.dev.host_csr(a, v ^ 0x1000)))
        assert app.dev.model.denied > 0
        assert {r: app.dev.model.region(r) for r in range(17)} == before
    else:
        app.rt.configure(app.dev.sxp.host_write)
        assert app.dev.sxp.ignored_host_writes > 0


@pytest.mark.parametrize("lanes", [1, 4])
def test_clear_load_baseline(lanes):
    """The non-confidential baseline of the overhead benchmark: binaries placed in the
    cleartext region 0 and read with aes = 0 land as they are; the SXP configuration opens
    region 0 exactly over them; a clear read of a keyed region is refused (CLEAR)."""
    from hw.sxp.regs import Cause as SxpCause
    app = App(device=("golden", lanes), seed=12)
    rng = random.Random(12)
    plain = {t: rng.randbytes(3000 + 16 * t % 512) for t in TILES}
    app.rt.clear_code(plain)
    base, limit = app.rt.clear[:2]
    app.launch()
    assert app.dev.model.region(0) == (base, limit)
    app.dev.run(app.rt.clear_boot())
    for t in TILES:
        mem = app.tile(t).memory
        assert mem[CODE_BASE:CODE_BASE + len(plain[t])] == plain[t], f"tile {t}: clear load differs"
        assert app.tile(t).digest is None, "a clear load is not measured"
    # the same loader pointed at a keyed region (encrypted code frames): refused
    keyed = app.code[TILES[0]].addr
    tile = app.tile(TILES[0])
    tile.run(clear_loader(tile, keyed, 1024))
    with pytest.raises(SecurityException):
        app.dev.run({})
    assert app.dev.model.exc and app.dev.model.record.cause is SxpCause.CLEAR
