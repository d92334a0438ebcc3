"""Benchmark of ``sha384``: cycles per block with blocks offered back to back (messages
following each other without a gap), blocks per cycle, latency of a digest, simulation
speed. Area and gate levels come from ``scripts/synth.py``. Run by ``make bench``."""
import hashlib
import random
import time

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from sw.sha import blocks
from tb.common.bench import record
from tb.sha.env import ShaTB

MESSAGES = 64
LONGEST = 2000      # bytes: 1..16 blocks per message


@cocotb.test()
async def throughput(dut):
    """64 random messages (1..16 blocks each) offered back to back, output always ready."""
    tb = ShaTB(dut)
    await tb.reset()
    messages = [random.randbytes(random.randrange(LONGEST + 1)) for _ in range(MESSAGES)]
    count = sum(len(blocks(m)) for m in messages)
    taken, lasts, digests = [], [], []
    cycle = 0
    wall = time.monotonic()
    await RisingEdge(tb.clk)
    await ReadOnly()            # queue in the ReadOnly phase: the source drives at the next edge
    for msg in messages:
        tb.send(msg)
    while tb.sink.received < MESSAGES:
        await RisingEdge(tb.clk)
        await ReadOnly()
        cycle += 1
        if int(dut.i__valid.value) and int(dut.i__ready.value):
            taken.append(cycle)
            if int(dut.i__payload.value) >> 1025:       # the `last` field, the top bit
                lasts.append(cycle)
        if int(dut.o__valid.value) and int(dut.o__ready.value):
            digests.append(cycle)
    wall = time.monotonic() - wall
    for n, msg in enumerate(messages):     # correctness against hashlib, outside the timed loop
        got = (tb.sink.queue[n]).to_bytes(48, "little")
        assert got == hashlib.sha384(msg).digest(), f"message {n} differs from hashlib"
    assert len(taken) == count and len(lasts) == len(digests) == MESSAGES
    span = taken[-1] - taken[0]
    record(messages=MESSAGES, blocks=count, cycles_per_block=round(span / (count - 1), 2),
           blocks_per_cycle=round((count - 1) / span, 5),
           bytes_per_cycle=round(128 * (count - 1) / span, 3),
           latency_cycles=max(d - last for last, d in zip(lasts, digests)),
           sim_cycles_per_second=round(cycle / wall))


def bench():
    from tb.common.bench import run_bench

    return {"sha384": run_bench("sha384", "tb.sha.bench_sha", "throughput")}
