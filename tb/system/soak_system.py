"""Soak campaign ``sxp_system`` (``make soak CAMPAIGN=sxp_system``, scripts/soak.py): attacks
by the host on the ITX read path of ``sxp_system`` (SXP + PCIe read table), one per round,
until ``SOAK_COUNT`` attacks have been made; good frames flow around every attack.

The world is the regression's (tb/system/env.py :class:`~tb.system.env.SystemTB`: tiles of
:mod:`sw.itx.tile`, host memory :class:`sw.itx.host.HostMemory`, the host shim
:class:`sw.itx.runtime.Runtime`, the CCU's key installs :class:`sw.itx.testing.TrustedCcu`).
A round: each of four tiles reads a fresh data stream of three frames (128–512 B, the same
size for all in a round) on a random physical context, encrypted by the runtime under that
context's key (AES-GCM, ``cryptography``); the host then attacks one frame *j* of one
victim tile in host memory:

=================  ===========================================  ===========================
kind               what the host serves in the victim's slot j   caught by
=================  ===========================================  ===========================
tamper_ciphertext  a ciphertext bit flipped                      SXP: AUTH
tamper_tag         a tag bit flipped                             SXP: AUTH
tamper_nonce       a nonce bit flipped                           SXP: AUTH
tamper_iv_tail     a bit of the IV tail 00000001 flipped         SXP: FRAME
wrong_key          the expected nonce, sealed under another key  SXP: AUTH
replay             the stream's frame j - 1                      tile: IV check
replay_stale       a frame of an earlier round, same context     tile: IV check
reorder            frames j and j + 1 swapped                    tile: IV check
misdirect          another tile's frame j (same key: IV check;   tile: IV check / SXP: AUTH
                   another context's key: AUTH)
=================  ===========================================  ===========================

One round in eight is a control round without an attack. After each attack the CCU
holds the tiles, the host's outstanding reads drain, and the chip is reset
(:meth:`SystemTB.restart`: keys scrubbed) and launched again (configuration over the host
port, keys and trusted mode over the CCU port) — the recovery ITX prescribes.

Per round, with *n* the frames that landed in a tile's data buffer (read back from tile
memory: the longest run of its stream's plaintext frames, in order, from the start):

- *accepted* (a bad frame got through): the victim's frame *j* landed (n > j), or a tile's
  data buffer holds, after its *n* good frames, anything but the untouched fill bytes, or
  an attack raised nothing;
- *lost* (a good frame refused or missing): fewer than *j* of the victim's frames landed;
  a control round where fewer than all of a tile's frames landed;
- the detection must be the expected one: for the SXP's, its latched record names the
  victim tile, an address inside the attacked frame and the expected cause, with
  EXC_COUNT = 1 for AUTH (no good frame raised anything) and at most one per beat of the
  refused frame for FRAME (docs/sxp.md: one FRAME per refused beat); for
  the tile's IV check, the victim halted with IV_MISMATCH and STATUS.exc = 0. Any other
  detection is a failure too (an SXP exception beyond those counts as a lost good frame).

Good frames the CCU's hold stops (the other tiles' frames not yet read when the attack was
caught) are counted as ``held_good_frames``, not as lost: stopping everything is the
reaction ITX prescribes. The tallies go to the JSON file ``SOAK_STATS``; the test fails on
the first problem (after writing them).
"""
import json
import os
import random

import cocotb
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from hw.sxp.regs import Cause as SxpCause
from sw.itx.frames import StreamType, encrypt_stream, payload_bytes, stream_nonce
from sw.itx.host import HostMemory
from sw.itx.runtime import DATA_BASE, Runtime
from sw.itx.testing import TrustedCcu
from sw.itx.tile import Cause, SecurityException
from tb.common.sim import CLOCK_PERIOD_NS, params
from tb.system.env import SystemTB, lanes_of

CONTEXTS = params().get("contexts", 16)
TILES = (0, 1, 5, 1471)
FRAMES = 3                      # frames per tile per round
FRAME_SIZES = (128, 128, 256, 512)
CONTROL = 1 / 8                 # rounds without an attack
SENTINEL = 0xA5
SXP_KINDS = {"tamper_ciphertext": SxpCause.AUTH, "tamper_tag": SxpCause.AUTH, "tamper_nonce": SxpCause.AUTH,
             "tamper_iv_tail": SxpCause.FRAME, "wrong_key": SxpCause.AUTH}
TILE_KINDS = ("replay", "replay_stale", "reorder")
KINDS = tuple(SXP_KINDS) + TILE_KINDS + ("misdirect",)


class Problem(AssertionError):
    pass


class Soak:
    def __init__(self, dut, rng):
        self.dut, self.rng = dut, rng
        lanes = lanes_of(dut)
        self.host = HostMemory(rng=random.Random(rng.getrandbits(32)), latency=(1, 24), lanes=lanes)
        self.rt = Runtime(self.host, region_bytes=16 << 20, contexts=CONTEXTS)
        self.keys = [rng.randbytes(32) for _ in range(CONTEXTS)]
        # every context's region and key exist from the start, so one configuration serves
        # every round (trusted mode refuses host writes)
        for ctx, key in enumerate(self.keys):
            self.rt.data_stream(b"\0", key=key, readers=[], ctx=ctx, frame_bytes=128)
        idle, stall = rng.choice([(0.0, 0.0), (0.1, 0.1), (0.3, 0.0), (0.0, 0.3)])
        self.tb = SystemTB(dut, TILES, self.host, CONTEXTS, idle=idle, stall=stall,
                           rng=random.Random(rng.getrandbits(32)))
        self.stale = {}             # (ctx, frame bytes) -> a frame of an earlier round
        self.stats = {"attempts": 0, "accepted": 0, "lost": 0, "cycles": 0,
                      "detail": {"rounds": 0, "control_rounds": 0, "good_frames": 0, "held_good_frames": 0,
                                 "caught_by_sxp": 0, "caught_by_iv_check": 0, "idle": idle, "stall": stall,
                                 "kinds": {k: 0 for k in KINDS}}}

    async def launch(self):
        """Host: the configuration; CCU: trusted mode and every context's key."""
        tb = self.tb
        self.rt.configure(tb.config_writer())
        await tb.host_csr.flush()
        TrustedCcu(tb.key_port(), self.rt.keys).launch(self.rt.key_sets()[0])
        await tb.ccu_csr.flush()
        st = await tb.ccu_csr.wait_trusted()
        if not st["trusted"] or st["exc"]:
            raise Problem(f"launch: trusted mode not entered cleanly: {st}")

    async def recover(self):
        """After a caught attack: the CCU holds the tiles, the host's reads drain, chip reset
        and a new launch."""
        tb = self.tb
        tb.hold()
        for _ in range(20_000):
            if not self.host.outstanding and not tb.cpl_src.queue:
                break
            await RisingEdge(tb.clk)
        else:
            raise Problem(f"{self.host.outstanding} host reads still outstanding after the hold")
        await tb.restart(self.host, TILES)
        await self.launch()

    def streams(self, frame_bytes):
        """A fresh stream per tile: tile -> (stream, plaintext)."""
        size = payload_bytes(frame_bytes)
        out = {}
        for t in TILES:
            ctx = self.rng.randrange(CONTEXTS)
            data = self.rng.randbytes(FRAMES * size)
            out[t] = (self.rt.data_stream(data, key=self.keys[ctx], readers=[t], ctx=ctx,
                                          frame_bytes=frame_bytes), data)
        return out

    def attack(self, streams, frame_bytes):
        """Tamper with host memory: (kind, victim, j, expected SXP cause or None for the IV check)."""
        rng, host = self.rng, self.host
        victim = rng.choice(TILES)
        s, _ = streams[victim]
        kind = rng.choice(KINDS)
        j = rng.randrange(FRAMES)
        if kind == "replay_stale" and (s.ctx, frame_bytes) not in self.stale:
            kind = "replay"
        if kind == "replay":
            j = rng.randrange(1, FRAMES)
        if kind == "reorder":
            j = rng.randrange(FRAMES - 1)
        addr = s.addr + j * frame_bytes
        frame = bytearray(host.read(addr, frame_bytes))
        expect = SXP_KINDS.get(kind)
        spans = {"tamper_ciphertext": (16, frame_bytes - 16), "tamper_tag": (frame_bytes - 16, frame_bytes),
                 "tamper_nonce": (0, 12), "tamper_iv_tail": (12, 16)}
        if kind in spans:
            frame[rng.randrange(*spans[kind])] ^= 1 << rng.randrange(8)
        elif kind == "wrong_key":
            other = rng.randbytes(32)
            frame = encrypt_stream(other, lambda i: stream_nonce(StreamType.DATA, s.id, j),
                                   rng.randbytes(payload_bytes(frame_bytes)), frame_bytes)
        elif kind == "replay":
            frame = host.read(addr - frame_bytes, frame_bytes)
        elif kind == "replay_stale":
            frame = self.stale[(s.ctx, frame_bytes)]
        elif kind == "reorder":
            following = host.read(addr + frame_bytes, frame_bytes)
            host.write(addr + frame_bytes, bytes(frame))        # slot j + 1 gets frame j,
            frame = following                                    # slot j frame j + 1
        elif kind == "misdirect":
            other = rng.choice([t for t in TILES if t != victim])
            o, _ = streams[other]
            frame = host.read(o.addr + j * frame_bytes, frame_bytes)
            expect = None if o.ctx == s.ctx else SxpCause.AUTH
        host.write(addr, bytes(frame))
        return kind, victim, j, expect, addr

    async def round(self, want_attack):
        tb, rng = self.tb, self.rng
        d = self.stats["detail"]
        frame_bytes = rng.choice(FRAME_SIZES)
        size = payload_bytes(frame_bytes)
        streams = self.streams(frame_bytes)
        for t in TILES:
            tb.tiles[t].memory[DATA_BASE:DATA_BASE + (FRAMES + 1) * size] = bytes([SENTINEL]) * ((FRAMES + 1) * size)
        fresh = {(s.ctx, frame_bytes): self.host.read(s.addr, frame_bytes) for s, _ in streams.values()}
        attack = self.attack(streams, frame_bytes) if want_attack else None
        self.stale.update(fresh)        # frames of this round, untampered: the next rounds' replays
        job = {}
        for s, _ in streams.values():
            job.update(self.rt.step(s, compute=False))
        caught = None
        try:
            await tb.run(job, max_cycles=100_000)
        except SecurityException as e:
            caught = e
        problems = []
        # every tile's data buffer: the plaintext of the frames that landed, then untouched
        # bytes (a frame the program refuses after commit, on its IV, never lands)
        landed, corrupt = {}, set()
        for t, (_, data) in streams.items():
            mem = tb.tiles[t].memory
            n = 0
            while n < FRAMES and mem[DATA_BASE + n * size:DATA_BASE + (n + 1) * size] == data[n * size:(n + 1) * size]:
                n += 1
            landed[t] = n
            if n < FRAMES and set(mem[DATA_BASE + n * size:DATA_BASE + (n + 1) * size]) != {SENTINEL}:
                corrupt.add(t)
                problems.append(f"tile {t}: after {n} good frames its data buffer holds bytes of no good frame")
        victim = attack[1] if attack else None
        self.stats["accepted"] += len(corrupt - {victim})        # the victim's: once, below
        d["good_frames"] += sum(landed.values())
        if attack is None:
            d["control_rounds"] += 1
            lost = sum(FRAMES - n for n in landed.values())
            if caught is not None or lost:
                self.stats["lost"] += max(lost, 1)
                problems.append(f"control round: {lost} good frames did not land, exception {caught}")
        else:
            kind, victim, j, expect, addr = attack
            self.stats["attempts"] += 1
            d["kinds"][kind] += 1
            d["held_good_frames"] += sum(FRAMES - landed[t] for t in TILES if t != victim)
            what = f"{kind} on tile {victim} frame {j} ({frame_bytes} B at {addr:#x})"
            n = landed[victim]
            if n > j or caught is None or victim in corrupt:
                self.stats["accepted"] += 1
                problems.append(f"{what}: accepted ({n} frames landed, exception {caught})")
            elif n < j:
                self.stats["lost"] += j - n
                problems.append(f"{what}: only {n} good frames before it landed ({caught})")
            wrong = await self.check_detection(what, victim, expect, addr, frame_bytes, caught)
            if not wrong:
                d["caught_by_sxp" if expect is not None else "caught_by_iv_check"] += 1
            problems += wrong
        d["rounds"] += 1
        if problems:
            raise Problem("; ".join(problems))
        if caught is not None:
            await self.recover()

    async def check_detection(self, what, victim, expect, addr, frame_bytes, caught):
        tb = self.tb
        regs = tb.regmap
        if expect is not None:
            try:
                await tb.until_high(self.dut.irq, timeout=64)
            except AssertionError:
                return [f"{what}: the SXP raised no exception (tile: {caught})"]
            st = await tb.ccu_csr.status()
            tile = (await tb.ccu_csr.read(regs["EXC_TILE"].addr)) & 0x7FF
            exc_addr = await tb.ccu_csr.read(regs["EXC_ADDR"].addr)
            count = await tb.ccu_csr.read(regs["EXC_COUNT"].addr)
            # AUTH: one exception, at the tag. FRAME (the IV refused): one per refused beat of
            # the frame (docs/sxp.md), so at most one per beat of it; more came from elsewhere
            most = 1 if expect is SxpCause.AUTH else frame_bytes // self.tb.beat_bytes
            got = (SxpCause(st["cause"]).name, tile, addr <= exc_addr < addr + frame_bytes, 1 <= count <= most)
            if count > most:                # exceptions of other frames: good frames refused
                self.stats["lost"] += count - most
            if got != (expect.name, victim, True, True):
                return [f"{what}: SXP record (cause, tile, inside the frame, 1 <= EXC_COUNT <= {most}) = {got} "
                        f"(address {exc_addr:#x}, EXC_COUNT {count}), expected ({expect.name}, {victim}, True, True)"]
        else:
            st = await tb.ccu_csr.status()
            if caught is None:
                return [f"{what}: the IV check did not fire (STATUS {st})"]
            if st["exc"]:                   # the SXP refused a frame: not the attacked one
                self.stats["lost"] += 1
            if caught.cause != Cause.IV_MISMATCH or caught.tile != victim or st["exc"]:
                return [f"{what}: caught as {caught.cause} on tile {caught.tile} with STATUS {st}, "
                        f"expected the IV check of tile {victim} and no SXP exception"]
        return []


@cocotb.test()
async def soak(dut):
    count = int(os.environ.get("SOAK_COUNT", "20"))
    stats_file = os.environ.get("SOAK_STATS")
    rng = random.Random(random.getrandbits(32))
    soak = Soak(dut, rng)
    try:
        await soak.tb.start()
        await soak.launch()
        while soak.stats["attempts"] < count:
            await soak.round(want_attack=rng.random() >= CONTROL)
    finally:
        soak.stats["cycles"] = round(get_sim_time("ns") / CLOCK_PERIOD_NS)
        if stats_file:
            with open(stats_file, "w") as f:
                json.dump(soak.stats, f)
    soak.tb.log.info("soak sxp_system: %s", soak.stats)
    d = soak.stats["detail"]
    assert count < 50 or (d["caught_by_sxp"] and d["caught_by_iv_check"]), \
        f"control: both detection paths should have been exercised: {d}"
