"""Benchmark of ``gcm_core`` (lanes 1) and ``gcm_core_x4`` (lanes 4): sustained beats per
cycle over 16 interleaved contexts and over one context, blocks per cycle, and latency.
Run by ``make bench``; every output beat is checked against the golden model."""
import random
import time
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gcm.layout import input_layout, key_layout, output_layout
from sw.gcm.model import GcmCoreModel, frame_beats
from tb.common.bench import record
from tb.common.payload import pack, unpack
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB
from tb.gcm.env import LANES, legal_lengths

BLOCKS = 100_000 if LANES == 1 else 80_000   # the lanes-4 model is slower per cycle
CONTEXTS = 16
INSTALL_EVERY = 50      # cycles between key installs in key_install_cost


def workload(contexts, beats):
    """Beats of frames of every legal length up to 1 KiB (random), randomly interleaved
    over *contexts* (no round robin), until *beats* beats in all."""
    ops, pending, lengths = [], {c: deque() for c in range(contexts)}, legal_lengths()
    while len(ops) < beats:
        ctx = random.randrange(contexts)
        if not pending[ctx]:
            blocks = [random.getrandbits(128) for _ in range(random.choice(lengths))]
            dec = random.getrandbits(1)
            pending[ctx].extend((op, beat, dec) for op, beat in
                                frame_beats(random.randbytes(12), blocks, LANES,
                                            random.getrandbits(128)))
        op, beat, dec = pending[ctx].popleft()
        ops.append((ctx, op, beat, dec))
    return ops


async def _start(dut):
    """A reset gcm_core with drivers on `key` and `i`, a sink on `o`, and a fresh model."""
    tb = TB(dut)
    key_src = StreamSource(dut, "key", tb.clk)
    i_src = StreamSource(dut, "i", tb.clk)
    sink = StreamSink(dut, "o", tb.clk)
    await tb.reset()
    return tb, key_src, i_src, sink, GcmCoreModel(CONTEXTS, LANES)


async def measure(dut, contexts, label):
    tb, key_src, i_src, sink, model = await _start(dut)
    keys = {c: random.getrandbits(256) for c in range(contexts)}
    for c, k in keys.items():
        key_src.send(pack(key_layout(), ctx=c, key=k))
        model.install_key(c, k)
    while not key_src.empty():
        await RisingEdge(tb.clk)
    ops = workload(contexts, BLOCKS // LANES)
    expected = [model.step(b, c, op, d) for c, op, b, d in ops]
    for c, op, b, d in ops:
        i_src.send(pack(input_layout(LANES), block=b, ctx=c, op=op, decrypt=d))
    # Sampling starts in this cycle: the source may drive the first beat in this very
    # time step, and a loop that first waits for the next edge counts its transfer one
    # cycle late (it measured 16 cycles of latency, against GcmCore.latency = 17, which
    # tb/gcm/test_gcm.py's fixed_latency checks). latency = cycle of the first `o`
    # transfer − cycle of the first `i` transfer.
    cycle, first_in, first_out, last_out = 0, None, None, None
    wall = time.monotonic()
    await ReadOnly()
    while True:
        if first_in is None and int(dut.i__valid.value) and int(dut.i__ready.value):
            first_in = cycle
        if int(dut.o__valid.value) and int(dut.o__ready.value):
            first_out = first_out if first_out is not None else cycle
            last_out = cycle
        if sink.received >= len(ops):
            break
        await RisingEdge(tb.clk)
        await ReadOnly()
        cycle += 1
    wall = time.monotonic() - wall
    bad = sum((got["block"], got["tag_ok"], got["err"]) != expected[n]
              for n, got in enumerate(unpack(output_layout(LANES), raw) for raw in sink.queue))
    assert bad == 0, f"{label}: {bad} outputs differ from the golden model"
    errs = sum(e[2] for e in expected)
    assert errs == 0, f"{label}: the workload produced {errs} err answers"
    beats_per_cycle = len(ops) / (last_out - first_out + 1)
    record(**{f"{label}_beats": len(ops),
              f"{label}_beats_per_cycle": round(beats_per_cycle, 4),
              f"{label}_blocks_per_cycle": round(beats_per_cycle * LANES, 4),
              f"{label}_sim_cycles_per_second": round(cycle / wall)})
    return first_out - first_in


@cocotb.test()
async def sixteen_contexts(dut):
    latency = await measure(dut, CONTEXTS, "ctx16")
    record(lanes=LANES, latency_cycles=latency)


@cocotb.test()
async def one_context(dut):
    await measure(dut, 1, "ctx1")


@cocotb.test()
async def key_install_cost(dut):
    """What a key install costs the data stream: one context streams frames back to back
    while keys are installed into another context every INSTALL_EVERY cycles; the cycles
    the stream loses, per install (the figure docs/gcm.md states as "one input slot")."""
    tb, key_src, i_src, sink, model = await _start(dut)
    key = random.getrandbits(256)
    key_src.send(pack(key_layout(), ctx=0, key=key))
    model.install_key(0, key)
    while not key_src.empty():
        await RisingEdge(tb.clk)
    ops = workload(1, 4000)
    expected = [model.step(b, c, op, d) for c, op, b, d in ops]
    for c, op, b, d in ops:
        i_src.send(pack(input_layout(LANES), block=b, ctx=c, op=op, decrypt=d))
    installs, cycle, first_out, last_out = 0, 0, None, None
    while sink.received < len(ops):
        await RisingEdge(tb.clk)
        cycle += 1
        if cycle % INSTALL_EVERY == 0 and first_out is not None and \
                sink.received < len(ops) - 2 * INSTALL_EVERY:
            key_src.send(pack(key_layout(), ctx=1, key=random.getrandbits(256)))
            installs += 1
        await ReadOnly()
        if int(dut.o__valid.value) and int(dut.o__ready.value):
            first_out = first_out or cycle
            last_out = cycle
    bad = sum((got["block"], got["tag_ok"], got["err"]) != expected[n]
              for n, got in enumerate(unpack(output_layout(LANES), raw) for raw in sink.queue))
    assert bad == 0, f"key_install_cost: {bad} outputs differ from the golden model"
    assert installs > 10, f"only {installs} installs during the stream"
    lost = (last_out - first_out + 1) - len(ops)
    record(install_every_cycles=INSTALL_EVERY, installs_during_stream=installs,
           stream_cycles_lost_per_install=round(lost / installs, 3))


def bench():
    from tb.common.bench import run_bench

    return {design: run_bench(design, "tb.gcm.bench_gcm") for design in ("gcm_core", "gcm_core_x4")}
