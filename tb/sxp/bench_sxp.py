"""Benchmark of the Secure Exchange Pipe at ``lanes`` 1 (``sxp``) and 4 (``sxp_x4``): bytes per
cycle through the write path (xb_i → pcie_o) and the read path (pcie_i → xb_o) for every
frame size 128..1024, each direction alone and both at once, and latencies.

Wire bytes/cycle count every beat of the frames (IV and tag slot included) over the cycles
from the direction's first to its last output transfer (steady state; the pipeline fill
is the latency figure), at full speed on every port, 24 frames per run in packets of 256
bytes; ``*_plain_bytes_per_cycle`` counts only the data blocks (wire × (frame − 32) /
frame). Both at once, each direction is measured over its own window. Targets at lanes 4
(docs/line-rate.md): 64 + 64 B/cycle both at once. Every output is checked against
the golden model (the scoreboard of tb/sxp/env.py); figures only, nothing asserted
about performance.
"""
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.sxp.packet import Kind
from sw.sxp.config import random_config
from sw.sxp.frames import FRAME_SIZES, beats_of, sealed_frame, write_frame
from sw.sxp.model import Packet, header
from tb.common.bench import record
from tb.sxp.env import BB, CONTEXTS, LANES, SxpTB, small_frame, transfer_cycles

FRAMES = 24          # per direction and frame size
PACKET_BLOCKS = 16   # 256-byte packets (the largest write request / completion)


async def _setup(dut):
    tb = SxpTB(dut)
    await tb.reset()
    rng = random.Random(1)
    cfg = random_config(rng, CONTEXTS, align=BB)
    keys = {p: rng.randbytes(32) for p in range(CONTEXTS)}
    await tb.configure(cfg, keys)
    return tb, rng, cfg, keys


def _packets(blocks, make):
    """A frame's blocks as 256-byte packets (the last may be shorter): ``make(k, n, beats,
    cc)`` builds the packet of blocks k..k+n."""
    for k in range(0, len(blocks), PACKET_BLOCKS):
        part = blocks[k:k + PACKET_BLOCKS]
        yield make(k, len(part), beats_of(part, LANES), int(k + PACKET_BLOCKS >= len(blocks)))


def _writes(tb, rng, cfg, size):
    """Queue FRAMES write frames (frame f on context f mod CONTEXTS); their beats."""
    beats = 0
    for f in range(FRAMES):
        phys = f % CONTEXTS
        xb = cfg.xbctx_of(phys)[0]
        addr = cfg.region_of_phys(phys)[0] + size * (f // CONTEXTS % 4)   # regions >= 4 KiB
        frame = write_frame(rng.randbytes(12), rng.randbytes(size - 32))
        for p in _packets(frame, lambda k, n, d, cc: Packet(
                header(tile=f, xbctx=xb, addr=addr + 16 * k, length=16 * n, aes=1, cc=cc), d)):
            tb.request(p)
            beats += len(p.data)
    return beats


def _reads(tb, rng, keys, size):
    """Queue FRAMES sealed read frames as completions (frame f on context f mod CONTEXTS,
    so both at once every context carries a write frame and a read frame); their beats."""
    beats = 0
    for f in range(FRAMES):
        phys = f % CONTEXTS
        frame = sealed_frame(keys[phys], rng.randbytes(12), rng.randbytes(size - 32))
        for p in _packets(frame, lambda k, n, d, cc: Packet(
                header(kind=Kind.READ_CPL, tile=f, addr=16 * k, length=16 * n, aes=1, cc=cc,
                       key_index=phys), d)):
            tb.completion(p)
            beats += len(p.data)
    return beats


@cocotb.test()
async def throughput(dut):
    tb, rng, cfg, keys = await _setup(dut)
    figures = {"lanes": LANES}
    for size in FRAME_SIZES:
        plain = (size - 32) / size
        for mode in ("write", "read", "both"):
            for q in (tb.pcie_o.queue, tb.xb_o.queue, tb.exp_w, tb.exp_r):
                q.clear()
            tb.pcie_o.received = tb.xb_o.received = 0
            w = _writes(tb, rng, cfg, size) if mode in ("write", "both") else 0
            r = _reads(tb, rng, keys, size) if mode in ("read", "both") else 0
            seen = await transfer_cycles(tb, w, r)
            for direction, port, beats in (("write", "pcie_o", w), ("read", "xb_o", r)):
                if not beats:
                    continue
                cycles = seen[port][-1] - seen[port][0] + 1
                bpc = BB * beats / cycles
                name = f"{mode}_{size}" if mode != "both" else f"both_{size}_{direction}"
                figures[f"{name}_bytes_per_cycle"] = round(bpc, 2)
                figures[f"{name}_plain_bytes_per_cycle"] = round(bpc * plain, 2)
            tb.compare()
    assert not tb.model.exceptions, f"exceptions {tb.model.exceptions[:3]}"
    record(**figures)


async def _latency(tb, send, src, out):
    """Cycles from the transfer of a packet's first beat on *src* to the transfer of its
    first beat on *out* (the pipeline otherwise empty)."""
    n_in, n_out = src.sent, out.received
    send()
    t, start = 0, None
    while out.received == n_out:
        await RisingEdge(tb.clk)
        await ReadOnly()
        t += 1
        if start is None and src.sent != n_in:
            start = t
        if t > 1000:
            raise AssertionError(f"{out.name}: nothing left within 1000 cycles")
    await RisingEdge(tb.clk)
    return t - start


@cocotb.test()
async def latency(dut):
    tb, rng, cfg, keys = await _setup(dut)
    b0 = cfg.regions[0][0]
    phys = 0
    xb, base = cfg.xbctx_of(phys)[0], cfg.region_of_phys(phys)[0]
    small = beats_of(small_frame(rng), LANES)
    figures = {
        "latency_clear_write_cycles": await _latency(
            tb, lambda: tb.request(Packet(header(addr=b0, length=BB), [1])), tb.xb_i, tb.pcie_o),
        "latency_aes_write_cycles": await _latency(
            tb, lambda: tb.request(Packet(header(xbctx=xb, addr=base, length=2 * BB, aes=1, cc=1),
                                          small)), tb.xb_i, tb.pcie_o),
        "latency_clear_completion_cycles": await _latency(
            tb, lambda: tb.completion(Packet(header(kind=Kind.READ_CPL, length=BB), [1])),
            tb.pcie_i, tb.xb_o),
    }
    frame = beats_of(sealed_frame(keys[1 % CONTEXTS], bytes(12), bytes(96)), LANES)
    figures["latency_aes_completion_cycles"] = await _latency(
        tb, lambda: tb.completion(Packet(header(kind=Kind.READ_CPL, length=128, aes=1, cc=1,
                                                key_index=1 % CONTEXTS), frame)),
        tb.pcie_i, tb.xb_o)
    await tb.drain()
    assert not tb.model.exceptions, f"exceptions {tb.model.exceptions[:3]}"
    record(**figures)


def bench():
    from tb.common.bench import run_bench

    return {design: run_bench(design, "tb.sxp.bench_sxp") for design in ("sxp", "sxp_x4")}
