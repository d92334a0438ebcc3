"""Benchmark of ``pcie_rdtable``: requests and completion beats per cycle under load, the
request and lookup latency, and the request rate a long host round trip leaves.

Run by ``make bench`` / ``scripts/bench.py pcie`` at ``lanes`` = 1 (the default table, 256
entries) and ``lanes`` = 4 (32 entries, RCB 128: the regression's build). Area and gate
levels of the default table come from ``scripts/synth.py``; for other parameter sets run
``python -m tb.pcie.bench_pcie --area 64 32:4`` (ENTRIES or ENTRIES:LANES; Yosys, minutes;
cached like synth.py).
"""
import heapq
import random
import time
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.pcie.layout import check_params
from hw.sxp.packet import Kind
from sw.pcie import Beat, completion_packets, decode, encode, header, random_split
from tb.common.bench import record
from tb.common.sim import params
from tb.common.stream import StreamSink, StreamSource
from tb.common.tb import TB

PARAMS = params()
P = check_params(**PARAMS)
G = P.granule            # one beat: the smallest read
LANES4 = {"entries": 32, "lanes": 4, "rcb": 128}


class Bench(TB):
    """Lean drivers: requests pre-queued, outputs always ready, a host that answers each
    request ``latency`` cycles after it left on req_o (no scoreboard: the regression in
    test_pcie.py checks correctness; here only the cc count and error counter)."""

    def __init__(self, dut):
        super().__init__(dut)
        dut.timeout.value = 0
        self.req_src = StreamSource(dut, "req_i", self.clk)
        self.cpl_src = StreamSource(dut, "cpl_i", self.clk)
        self.req_sink = StreamSink(dut, "req_o", self.clk)
        self.cpl_sink = StreamSink(dut, "cpl_o", self.clk)
        self.cycle = 0
        self.req_cycles, self.out_cycles, self.first_beats = [], [], []
        self.cc = 0
        self.req_out_first = None     # first cycle req_o was valid
        self.latency, self.split = 0, "coarsest"
        self.due = []          # heap of (cycle, seq, packets)
        self.seq = 0
        self.lookups = []      # cycles from cpl_i taking a first beat to cpl_o sending it
        cocotb.start_soon(self._watch())
        cocotb.start_soon(self._host())

    async def reset(self, cycles=2):
        """Reset, then wait out the table scrub (``req_i`` refused ``scrub_cycles`` cycles)."""
        await super().reset(cycles)
        await self.until_high(self.dut.req_i__ready)

    async def _watch(self):
        d = self.dut
        firsts = deque()       # cycles cpl_i accepted a first beat not yet out on cpl_o
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.cycle += 1
            if int(d.req_i__valid.value) and int(d.req_i__ready.value):
                self.req_cycles.append(self.cycle)
            if int(d.req_o__valid.value) and self.req_out_first is None:
                self.req_out_first = self.cycle
            if int(d.cpl_o__valid.value) and int(d.cpl_o__ready.value):
                self.out_cycles.append(self.cycle)
                if decode(d.cpl_o__payload.value, P.lanes).first and firsts:
                    # no completion is dropped here: first beats leave in order
                    first = firsts.popleft()
                    if len(self.lookups) < 100:
                        self.lookups.append(self.cycle - first)
            if int(d.cpl_i__valid.value) and int(d.cpl_i__ready.value):
                if decode(d.cpl_i__payload.value, P.lanes).first:
                    firsts.append(self.cycle)

    async def _host(self):
        while True:
            await RisingEdge(self.clk)
            while self.req_sink.queue:
                b = decode(self.req_sink.queue.popleft(), P.lanes)
                h = b.hdr
                split = random_split(h["addr"], h["length"], P.rcb, P.max_payload, random,
                                     self.split, lanes=P.lanes)
                pkts = completion_packets(h["tag"], h["addr"], bytes(h["length"]), split, P.lanes)
                self.seq += 1
                heapq.heappush(self.due, (self.cycle + self.latency, self.seq, pkts))
            n = 0
            while self.due and self.due[0][0] <= self.cycle and len(self.cpl_src.queue) < 64:
                _, _, pkts = heapq.heappop(self.due)
                for pkt in pkts:
                    for beat in pkt:
                        self.cpl_src.send(encode(beat, P.lanes))
                n += 1
            while self.cpl_sink.queue:
                b = decode(self.cpl_sink.queue.popleft(), P.lanes)
                if b.last and b.hdr["cc"]:
                    self.cc += 1

    def requests(self, count, length):
        for k in range(count):
            hdr = header(kind=Kind.READ_REQ, tile=k % 1472, key_index=k % 16, aes=k & 1,
                         addr=0x1000_0000 + 0x400 * (k % 4096), length=length)
            self.req_src.send(encode(Beat(0, hdr, 1, 1), P.lanes))

    async def run(self, count, length, latency, split="coarsest"):
        """*count* reads of *length* bytes; returns (requests/cycle, cpl beats/cycle)."""
        self.latency, self.split = latency, split
        self.req_cycles, self.out_cycles, self.cc = [], [], 0
        self.requests(count, length)
        while self.cc < count:
            await RisingEdge(self.clk)
        assert int(self.dut.err_count.value) == 0 and int(self.dut.outstanding.value) == 0
        r, o = self.req_cycles, self.out_cycles
        return (round(len(r) / (r[-1] - r[0] + 1), 4), round(len(o) / (o[-1] - o[0] + 1), 4),
                len(o))


@cocotb.test()
async def throughput(dut):
    """Three loads, outputs always ready:
    - 20,000 one-beat reads (16 · lanes bytes), host round trip R = min(64, entries / 2)
      cycles (fewer round trips than tags in flight): one request and one completion beat
      per cycle at once (the lookup for a completion on every cycle);
    - 500 reads of 1 KiB, uniformly random legal splits, round trip R: completion beats
      per cycle (requests then wait on the data);
    - 4,000 one-beat reads with a 512-cycle round trip: the table fills, and the request
      rate is entries / round trip."""
    tb = Bench(dut)
    await tb.reset()
    wall = time.monotonic()
    round_trip = min(64, P.entries // 2)
    req_rate, beat_rate, _ = await tb.run(20_000, G, round_trip)
    _, big_beat_rate, beats = await tb.run(500, 1024, round_trip, split="uniform")
    long_req_rate, _, _ = await tb.run(4_000, G, 512)
    wall = time.monotonic() - wall
    lookups = sorted(set(tb.lookups))
    record(host_round_trip_cycles=round_trip,
           requests_per_cycle=req_rate, cpl_beats_per_cycle_one_beat_reads=beat_rate,
           cpl_beats_per_cycle_1KiB_reads=big_beat_rate,
           requests_per_cycle_512_cycle_round_trip=long_req_rate,
           completion_latency_cycles=lookups[0] if len(lookups) == 1 else lookups,
           sim_cycles_per_second=round(tb.cycle / wall))


@cocotb.test()
async def latency(dut):
    """Request latency: req_i accepted → req_o valid, outputs ready."""
    tb = Bench(dut)
    await tb.reset()
    tb.requests(1, G)
    for _ in range(10):
        await RisingEdge(tb.clk)
    record(request_latency_cycles=tb.req_out_first - tb.req_cycles[0])


def bench():
    from tb.common.bench import run_bench

    results = {}
    for label, build in (("pcie_rdtable", {}), ("pcie_rdtable_x4", LANES4)):
        figures = run_bench("pcie_rdtable", "tb.pcie.bench_pcie", "throughput", params=build)
        figures.update({k: v for k, v in run_bench("pcie_rdtable", "tb.pcie.bench_pcie", "latency",
                                                   params=build).items() if k != "wall_seconds"})
        results[label] = {"params": build, **figures}
    return results


def area(entries, lanes=1):
    """Synthesise ``pcie_rdtable`` with *entries* entries and *lanes* lanes (other
    parameters default) with the flow of scripts/synth.py; cached in
    sim_build/reports/area/pcie_rdtable-<params>.json."""
    from scripts import synth

    params = {k: v for k, v in (("entries", entries), ("lanes", lanes))
              if v != {"entries": 256, "lanes": 1}[k]}
    return synth.synthesise("pcie_rdtable", params)


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--area", nargs="+", metavar="ENTRIES[:LANES]",
                        help="synthesise these table sizes (and lanes) and print their area")
    args = parser.parse_args()
    if args.area:
        for spec in args.area:
            r = area(*(int(x) for x in spec.split(":")))
            print(json.dumps({k: v for k, v in r.items() if k != "cells"}))
    else:
        print(json.dumps(bench(), indent=1))
