"""Benchmark of the Secure Exchange Pipe: payload bytes per cycle through the write path
(xb_i → pcie_o) and the read path (pcie_i → xb_o) for every frame size 128..1024, each
direction alone and both at once (they share one gcm_core), and latencies.

Bytes/cycle counts every beat of the frames (IV and tag slot included) over the cycles
from the first to the last output transfer (steady state; the pipeline fill is the
latency figure), at full speed on every port, 24 frames per run in packets of 256 bytes;
``*_plain_bytes_per_cycle`` counts only the data blocks. Every output is checked against
the golden model (the scoreboard of tb/sxp/test_sxp.py); figures only, nothing asserted
about performance.
"""
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.sxp.packet import Kind
from sw.sxp.config import random_config
from sw.sxp.frames import FRAME_SIZES, sealed_frame, write_frame
from sw.sxp.model import Packet, header
from tb.common.bench import record
from tb.sxp.test_sxp import CONTEXTS, SxpTB, frame_packets

FRAMES = 24          # per direction and frame size


async def _setup(dut):
    tb = SxpTB(dut)
    await tb.reset()
    rng = random.Random(1)
    cfg = random_config(rng, CONTEXTS)
    keys = {p: rng.randbytes(32) for p in range(CONTEXTS)}
    await tb.configure(cfg, keys)
    return tb, rng, cfg, keys


def _wctx(f):
    # writes on the lower half of the contexts, reads on the upper half: a physical context
    # carries one direction at a time (docs/sxp.md)
    return f % max(1, CONTEXTS // 2)


def _rctx(f):
    return CONTEXTS // 2 + f % max(1, CONTEXTS - CONTEXTS // 2) if CONTEXTS > 1 else 0


def _writes(tb, rng, cfg, size):
    beats = 0
    for f in range(FRAMES):
        phys = _wctx(f)
        base, _ = cfg.region_of_phys(phys)
        pkts = frame_packets(write_frame(rng.randbytes(12), rng.randbytes(size - 32)), rng,
                             tile=f, xbctx=cfg.xbctx_of(phys)[0], addr=base + size * f)
        # packets of 256 bytes (the largest write request)
        blocks = [b for p in pkts for b in p.data]
        for k in range(0, len(blocks), 16):
            part = blocks[k:k + 16]
            tb.request(Packet(header(tile=f, xbctx=cfg.xbctx_of(phys)[0],
                                     addr=base + size * f + 16 * k, length=16 * len(part),
                                     aes=1, cc=int(k + 16 >= len(blocks))), part))
            beats += len(part)
    return beats


def _reads(tb, rng, keys, size, cpl_bytes=256):
    beats = 0
    for f in range(FRAMES):
        phys = _rctx(f)
        frame = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(size - 32))
        per = cpl_bytes // 16
        for k in range(0, len(frame), per):
            part = frame[k:k + per]
            tb.completion(Packet(header(kind=Kind.READ_CPL, tile=f, addr=16 * k,
                                        length=16 * len(part), aes=1,
                                        cc=int(k + per >= len(frame)), key_index=phys), part))
            beats += len(part)
    return beats


async def _measure(tb, w_beats, r_beats):
    """``(first, last)`` cycles of output transfers on either output port."""
    dut = tb.dut
    cycle, first, last = 0, None, None
    while tb.pcie_o.received < w_beats or tb.xb_o.received < r_beats:
        await RisingEdge(tb.clk)
        await ReadOnly()
        cycle += 1
        if (int(dut.pcie_o__valid.value) and int(dut.pcie_o__ready.value)) or \
                (int(dut.xb_o__valid.value) and int(dut.xb_o__ready.value)):
            first = first or cycle
            last = cycle
        if cycle > 200_000:
            raise AssertionError("benchmark stalled")
    await RisingEdge(tb.clk)
    return first, last


@cocotb.test()
async def throughput(dut):
    tb, rng, cfg, keys = await _setup(dut)
    figures = {}
    for size in FRAME_SIZES:
        plain = (size - 32) / size
        for mode in ("write", "read", "both"):
            tb.pcie_o.queue.clear()
            tb.xb_o.queue.clear()
            tb.exp_w.clear()
            tb.exp_r.clear()
            tb.pcie_o.received = tb.xb_o.received = 0
            w = _writes(tb, rng, cfg, size) if mode in ("write", "both") else 0
            r = _reads(tb, rng, keys, size) if mode in ("read", "both") else 0
            first, last = await _measure(tb, w, r)
            cycles = last - first + 1          # steady state: first to last output beat
            bpc = 16 * (w + r) / cycles
            figures[f"{mode}_{size}_bytes_per_cycle"] = round(bpc, 2)
            figures[f"{mode}_{size}_plain_bytes_per_cycle"] = round(bpc * plain, 2)
            if mode == "both":
                figures[f"both_{size}_write_share_bytes_per_cycle"] = round(16 * w / cycles, 2)
                figures[f"both_{size}_read_share_bytes_per_cycle"] = round(16 * r / cycles, 2)
            tb.compare()
    record(**figures)


@cocotb.test()
async def latency(dut):
    tb, rng, cfg, keys = await _setup(dut)
    async def one(send, src, out):
        """Cycles from the first beat's transfer on *src* to the first beat on *out*."""
        n_in, n_out = src.sent, out.received
        send()
        t, start = 0, None
        while out.received == n_out:
            await RisingEdge(tb.clk)
            await ReadOnly()
            t += 1
            if start is None and src.sent != n_in:
                start = t
        await RisingEdge(tb.clk)
        return t - start
    base0, _ = cfg.regions[0]
    clear = await one(lambda: tb.request(Packet(header(addr=base0, length=16), [1])), tb.xb_i, tb.pcie_o)
    phys = 0
    base, _ = cfg.region_of_phys(phys)
    aes = await one(lambda: tb.request(Packet(header(xbctx=cfg.xbctx_of(phys)[0], addr=base,
                                                     length=32, aes=1, cc=1),
                                              write_frame(bytes(12), b"")[:1] + [0])), tb.xb_i,
                tb.pcie_o)
    for _ in range(40):
        await RisingEdge(tb.clk)
    frame = sealed_frame(keys[1 % CONTEXTS], bytes(12), bytes(96))
    cpl = await one(lambda: tb.completion(Packet(header(kind=Kind.READ_CPL, length=128, aes=1,
                                                        cc=1, key_index=1 % CONTEXTS), frame)),
                    tb.pcie_i, tb.xb_o)
    await tb.drain()
    record(latency_clear_cycles=clear, latency_aes_write_cycles=aes,
           latency_aes_completion_cycles=cpl)


def bench():
    from tb.common.bench import run_bench

    return {"sxp": run_bench("sxp", "tb.sxp.bench_sxp")}
