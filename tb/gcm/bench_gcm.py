"""Benchmark of ``gcm_core``: sustained operations per cycle over 16 interleaved contexts
and over one context, and op latency. Run by ``make bench``."""
import random
import time
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.gcm.layout import Op, input_layout, key_layout, output_layout
from sw.gcm.model import GcmCoreModel, j0_block
from tb.common.bench import record
from tb.common.payload import pack, unpack
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB

BLOCKS = 100_000
CONTEXTS = 16


def workload(contexts, blocks):
    """Ops of frames of 1..62 data blocks, round-robin-free random interleaving over
    *contexts*, until *blocks* ops in all."""
    ops, pending = [], {c: deque() for c in range(contexts)}
    while len(ops) < blocks:
        ctx = random.randrange(contexts)
        if not pending[ctx]:
            n = random.randint(1, 62)
            iv = j0_block(random.randbytes(12))
            dec = random.getrandbits(1)
            pending[ctx].extend([(Op.IV, iv, dec)] + [(Op.DATA, random.getrandbits(128), dec)] * n
                                + [(Op.MAC, random.getrandbits(128), dec)])
        op, block, dec = pending[ctx].popleft()
        ops.append((ctx, op, block, dec))
    return ops


async def measure(dut, contexts, label):
    tb = TB(dut)
    key_src = StreamSource(dut, "key", tb.clk)
    i_src = StreamSource(dut, "i", tb.clk)
    sink = StreamSink(dut, "o", tb.clk)
    await tb.reset()
    model = GcmCoreModel(CONTEXTS)
    keys = {c: random.getrandbits(256) for c in range(contexts)}
    # key installs: cycles from the first install accepted to the last
    for c, k in keys.items():
        key_src.send(pack(key_layout(), ctx=c, key=k))
        model.install_key(c, k)
    while not key_src.empty():
        await RisingEdge(tb.clk)
    ops = workload(contexts, BLOCKS)
    expected = [model.step(b, c, op, d) for c, op, b, d in ops]
    for c, op, b, d in ops:
        i_src.send(pack(input_layout, block=b, ctx=c, op=op, decrypt=d))
    cycle, first_in, first_out, last_out = 0, None, None, None
    wall = time.monotonic()
    while sink.received < len(ops):
        await RisingEdge(tb.clk)
        await ReadOnly()
        cycle += 1
        if first_in is None and int(dut.i__valid.value) and int(dut.i__ready.value):
            first_in = cycle
        if int(dut.o__valid.value) and int(dut.o__ready.value):
            first_out = first_out or cycle
            last_out = cycle
    wall = time.monotonic() - wall
    bad = 0
    for n, raw in enumerate(sink.queue):
        got = unpack(output_layout, raw)
        if (got["block"], got["tag_ok"], got["err"]) != expected[n]:
            bad += 1
    assert bad == 0, f"{label}: {bad} outputs differ from the golden model"
    errs = sum(e[2] for e in expected)
    assert errs == 0, f"{label}: the workload produced {errs} err answers"
    record(**{f"{label}_ops": len(ops),
              f"{label}_ops_per_cycle": round(len(ops) / (last_out - first_out + 1), 4),
              f"{label}_sim_cycles_per_second": round(cycle / wall)})
    return first_out - first_in


@cocotb.test()
async def sixteen_contexts(dut):
    latency = await measure(dut, CONTEXTS, "ctx16")
    record(latency_cycles=latency)


@cocotb.test()
async def one_context(dut):
    await measure(dut, 1, "ctx1")


def bench():
    from tb.common.bench import run_bench

    return {"gcm_core": run_bench("gcm_core", "tb.gcm.bench_gcm")}
