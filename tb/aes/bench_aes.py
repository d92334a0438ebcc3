"""Benchmark of ``aes256``: sustained blocks per cycle, latency, simulation speed.
Area and gate levels come from ``scripts/synth.py``. Run by ``make bench``."""
import random
import time

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from hw.aes.layout import input_layout, output_layout
from tb.common.bench import record
from tb.common.payload import pack, unpack
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB

BLOCKS = 100_000


@cocotb.test()
async def throughput(dut):
    """A 100,000-block stream, a new key per block, output always ready."""
    tb = TB(dut)
    source, sink = StreamSource(dut, "i", tb.clk), StreamSink(dut, "o", tb.clk)
    await tb.reset()
    keys = [random.randbytes(32) for _ in range(BLOCKS)]
    blocks = [random.randbytes(16) for _ in range(BLOCKS)]
    lay_i, lay_o = input_layout(), output_layout()
    for k, b in zip(keys, blocks):
        source.send(pack(lay_i, block=int.from_bytes(b, "little"), key=int.from_bytes(k, "little")))
    first_in = first_out = last_out = None
    cycle = 0
    wall = time.monotonic()
    while sink.received < BLOCKS:
        await RisingEdge(tb.clk)
        await ReadOnly()
        cycle += 1
        if first_in is None and int(dut.i__valid.value) and int(dut.i__ready.value):
            first_in = cycle
        if int(dut.o__valid.value) and int(dut.o__ready.value):
            last_out = cycle
            if first_out is None:
                first_out = cycle
    wall = time.monotonic() - wall
    # correctness of the whole stream against OpenSSL, outside the timed loop
    for n, (k, b) in enumerate(zip(keys, blocks)):
        enc = Cipher(algorithms.AES(k), modes.ECB()).encryptor()
        got = unpack(lay_o, sink.queue[n])["block"].to_bytes(16, "little")
        assert got == enc.update(b), f"block {n} differs from OpenSSL"
    latency = first_out - first_in
    record(blocks=BLOCKS, cycles=last_out - first_in + 1,
           blocks_per_cycle=round(BLOCKS / (last_out - first_out + 1), 4),
           latency_cycles=latency, sim_cycles_per_second=round(cycle / wall))


def bench():
    from tb.common.bench import run_bench

    return {"aes256": run_bench("aes256", "tb.aes.bench_aes", "throughput")}
