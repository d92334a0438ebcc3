"""Benchmark of the assembled SXP path (``sxp_system`` at lanes 1, ``sxp_system_x4`` at
lanes 4) and of the host shim. Run by ``make bench BLOCK=system``.

- ``code_load``: secure boot of a 1 MiB application (8 tiles × 128 KiB, 1 KiB frames:
  992 payload bytes each) through the RTL, the tiles spread over the 4 physical contexts
  (the model provider's key installed in each), no idle cycles or back-pressure: payload
  bytes per cycle end to end (tile request to the bootloader's commit), link beats per
  cycle on ``pcie_i`` (frame beats / cycles: 1.0 is line rate at any lanes) and cycles per
  frame. The host answers a read after 8..24 cycles (:data:`FAST_HOST`) and keeps
  completion beats queued ahead of ``pcie_i`` (:data:`tb.system.env.CPL_AHEAD_BEATS`):
  with one read outstanding per physical context, 4 contexts keep 4 × 16 beats of 1 KiB
  frames in flight at lanes 4, which covers that round trip, so the figure measures the
  RTL, not the host.
- ``code_load_slow_host``: the same with the host latency of the lanes-1 figures, 20..60
  cycles (:data:`SLOW_HOST`): at lanes 4 the round trip then exceeds the 64 beats in
  flight and the one-read-per-context rule shows.
- ``code_load_clear``: the non-confidential baseline of ``code_load``: the same 1 MiB
  onto the same 8 tiles, read in the clear from region 0 (``aes`` = 0, 1 KiB reads, no
  frames, no key, no trusted mode), same host. ``bench()`` reports the ITX overhead,
  1 − encrypted / clear payload B/cycle (the paper: < 5 % for confidential against normal
  runs).
- ``code_load_8ctx``: ``code_load`` on a build with 8 physical contexts (run at lanes 4
  only): 8 reads of 1 KiB in flight instead of 4, more than the read round trip.
- ``code_load_one_context``: 128 KiB onto 4 tiles that all read through context 0 (slow
  host): the SXP allows one outstanding read per physical context, so this is the round
  trip per frame.
- host side (``bench()``): the shim's frame encryption (``encrypt_stream``) in MB/s
  against a bare ``AESGCM.encrypt`` loop on the same 1 KiB frames.
"""
import random
import time

import cocotb

from sw.itx.frames import StreamType, encrypt_stream, payload_bytes, stream_nonce
from sw.itx.host import HostMemory
from sw.itx.runtime import Runtime
from sw.itx.testing import TrustedCcu
from sw.itx.tile import check_measurement
from tb.common.bench import record
from tb.common.sim import params
from tb.system.env import SystemTB, lanes_of

CONTEXTS = params().get("contexts", 4)  # the DUT's
FRAME = 1024
FAST_HOST = (8, 24)        # cycles from a read request on pcie_o to its first completion
SLOW_HOST = (20, 60)
DESIGNS = ("sxp_system", "sxp_system_x4")    # lanes 1 and 4


async def load(dut, tiles, per_tile, contexts_used, label, latency):
    rng = random.Random(1)
    key = rng.randbytes(32)
    lanes = lanes_of(dut)
    host = HostMemory(rng=rng, latency=latency, lanes=lanes)
    rt = Runtime(host, contexts=CONTEXTS)
    binaries = {t: rng.randbytes(per_tile) for t in tiles}
    for k in range(contexts_used):
        rt.code_stream({t: binaries[t] for t in tiles[k::contexts_used]}, key=key, ctx=k,
                       frame_bytes=FRAME)
    tb = SystemTB(dut, tiles, host, CONTEXTS)
    await tb.start()
    rt.configure(tb.config_writer())
    await tb.host_csr.flush()
    TrustedCcu(tb.key_port(), rt.keys).launch(rt.key_sets()[0])
    await tb.ccu_csr.flush()
    assert (await tb.ccu_csr.wait_trusted())["trusted"]
    wall = time.monotonic()
    cycles = await tb.run(rt.boot())
    wall = time.monotonic() - wall
    check_measurement(tb.tiles.values(), rt.measurement())
    total = per_tile * len(tiles)
    frames = tb.frames
    record(**{"lanes": lanes,
              f"{label}_payload_bytes": total,
              f"{label}_frames": frames,
              f"{label}_cycles": cycles,
              f"{label}_payload_bytes_per_cycle": round(total / cycles, 2),
              f"{label}_cycles_per_frame": round(cycles / frames, 1),
              f"{label}_link_beats_per_cycle": round(frames * FRAME / tb.beat_bytes / cycles, 3),
              f"{label}_sim_cycles_per_s": round(cycles / wall)})
    tb.log.info("%s: %d B in %d cycles = %.2f B/cycle, %.1f cycles/frame", label, total,
                cycles, total / cycles, cycles / frames)


EIGHT_TILES = tuple(range(0, 8 * 184, 184))


@cocotb.test()
async def code_load(dut):
    await load(dut, EIGHT_TILES, 128 * 1024, CONTEXTS, "boot_1MiB_4ctx", FAST_HOST)


@cocotb.test()
async def code_load_clear(dut):
    rng = random.Random(1)
    lanes = lanes_of(dut)
    host = HostMemory(rng=rng, latency=FAST_HOST, lanes=lanes)
    rt = Runtime(host, contexts=CONTEXTS)
    binaries = {t: rng.randbytes(128 * 1024) for t in EIGHT_TILES}
    rt.clear_code(binaries)
    tb = SystemTB(dut, EIGHT_TILES, host, CONTEXTS)
    await tb.start()
    rt.configure(tb.config_writer())
    await tb.host_csr.flush()
    wall = time.monotonic()
    cycles = await tb.run(rt.clear_boot(block_bytes=FRAME))
    wall = time.monotonic() - wall
    for t in EIGHT_TILES:
        assert tb.tiles[t].memory[:len(binaries[t])] == binaries[t], f"tile {t}: clear load"
    total = sum(map(len, binaries.values()))
    label = "clear_1MiB"
    record(**{f"{label}_payload_bytes": total, f"{label}_cycles": cycles,
              f"{label}_payload_bytes_per_cycle": round(total / cycles, 2),
              f"{label}_sim_cycles_per_s": round(cycles / wall)})
    tb.log.info("%s: %d B in %d cycles = %.2f B/cycle", label, total, cycles, total / cycles)


@cocotb.test(skip=CONTEXTS < 8)
async def code_load_8ctx(dut):
    """The 1 MiB load over 8 contexts (a build with 8): 8 reads of 1 KiB in flight."""
    await load(dut, EIGHT_TILES, 128 * 1024, 8, "boot_1MiB_8ctx", FAST_HOST)


@cocotb.test()
async def code_load_slow_host(dut):
    await load(dut, EIGHT_TILES, 128 * 1024, CONTEXTS, "boot_1MiB_4ctx_slow_host", SLOW_HOST)


@cocotb.test()
async def code_load_one_context(dut):
    await load(dut, (0, 1, 2, 3), 32 * 1024, 1, "boot_128KiB_1ctx", SLOW_HOST)


def encryption_rate(total=16 << 20, frame=FRAME, repeat=3):
    """(shim MB/s, bare AESGCM MB/s) encrypting *total* payload bytes into *frame*-byte
    frames; best of *repeat*."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    key = bytes(range(32))
    data = random.Random(2).randbytes(total)
    size = payload_bytes(frame)
    n = -(-total // size)
    nonces = [stream_nonce(StreamType.DATA, 1, i) for i in range(n)]
    shim = raw = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        encrypt_stream(key, lambda i: stream_nonce(StreamType.DATA, 1, i), data, frame)
        shim = min(shim, time.perf_counter() - t)
        aead = AESGCM(key)
        t = time.perf_counter()
        for i in range(n):
            aead.encrypt(nonces[i], data[i * size:(i + 1) * size], None)
        raw = min(raw, time.perf_counter() - t)
    return total / shim / 1e6, total / raw / 1e6


def bench():
    from tb.common.bench import run_bench

    out = {design: run_bench(design, "tb.system.bench_system",
                             params={"contexts": CONTEXTS, "entries": 16})
           for design in DESIGNS}
    # lanes 4 with 8 physical contexts: twice the reads in flight of the 4-context build
    out["sxp_system_x4-contexts_8"] = run_bench(
        "sxp_system_x4", "tb.system.bench_system", testcase="code_load_8ctx,code_load_clear",
        params={"contexts": 8, "entries": 16})
    for figures in out.values():        # ITX overhead: confidential against normal, 1 MiB
        enc = figures.get("boot_1MiB_4ctx_payload_bytes_per_cycle",
                          figures.get("boot_1MiB_8ctx_payload_bytes_per_cycle"))
        clear = figures.get("clear_1MiB_payload_bytes_per_cycle")
        if enc and clear:
            figures["itx_overhead_pct"] = round(100 * (1 - enc / clear), 1)
    shim, raw = encryption_rate()
    out["itx_shim"] = dict(shim_encrypt_MBps=round(shim), aesgcm_encrypt_MBps=round(raw),
                           shim_overhead_pct=round(100 * (raw / shim - 1), 1))
    return out


if __name__ == "__main__":
    import json
    print(json.dumps(bench(), indent=1))
