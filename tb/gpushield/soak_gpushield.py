"""Soak campaign ``bcu`` (``make soak CAMPAIGN=bcu``, scripts/soak.py): warps through the
GPUShield BCU in rounds, until ``SOAK_COUNT`` warps have been answered.

A round is one kernel launch on a fresh driver (:meth:`tb.gpushield.env.BcuTB.driver`): a
random kernel of :data:`sw.gpushield.traces.KERNELS` (random seed, with or without the
compiler's bounds analysis, i.e. Type 1 warps), plus a read-only buffer and a Type 3
buffer so that every violation kind exists; its warps in order, with the violations of
:func:`sw.gpushield.traces.violations` (every kind, against this launch and the previous
one of the same buffers) and warps with one lane mutated (off the end, below the base, a
forged id, a stale pointer) inserted at random places; random precise mode, idle cycles,
back-pressure and memory latency per round. :class:`~tb.gpushield.env.BcuTB` checks every
response, fetch and ``exc`` pulse against the golden model; here every warp is also judged
against what it is:

- a kernel-trace warp is in bounds by construction (sw/gpushield/traces.py): the BCU must
  pass it (a *false alarm* if not, counted as ``lost``);
- a :func:`~sw.gpushield.traces.violations` warp is a violation by construction: the BCU
  must refuse it (a *missed violation* if not, counted as ``accepted``);
- a mutated warp is judged by the golden model (the mutation may land in bounds).

The tallies go to the JSON file ``SOAK_STATS`` (also when a check fails); the test fails
at the end of the round of the first problem. Nothing under tb/gpushield, hw/gpushield or
sw/gpushield is changed: this module only imports them.
"""
import json
import os
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from hw.gpushield.layout import VA_BITS, resp_layout
from sw.gpushield.model import pointer_addr, unpack_fields, with_addr
from sw.gpushield.traces import KERNELS, kernel, to_request, violations
from tb.common.sim import CLOCK_PERIOD_NS
from tb.gpushield.env import BcuTB

TRACE, VIOLATION, MUTANT = "trace", "violation", "mutant"
MAX_WARPS_PER_ROUND = 2000      # long kernels are cut (the rest of their warps are not sent)


class RespLog:
    """The ``ok`` bit of every response transfer, in order (the env's scoreboard compares
    the RTL with the model; the soak counts which way a disagreement goes)."""

    def __init__(self, tb):
        self.oks = deque()
        cocotb.start_soon(self._run(tb))

    async def _run(self, tb):
        dut = tb.dut
        while True:
            await RisingEdge(tb.clk)
            await ReadOnly()
            if int(dut.resp__valid.value) and int(dut.resp__ready.value) and not tb.in_reset:
                self.oks.append(unpack_fields(resp_layout, int(dut.resp__payload.value))["ok"])


def mutate(req, launch, prev, rng):
    """*req* with one active lane changed: past its buffer's end, below its base, forged id
    bits or the previous launch's pointer (may stay in bounds: the model decides)."""
    lanes = [k for k in range(len(req.addrs)) if req.mask >> k & 1] or [0]
    k = rng.choice(lanes)
    a = req.addrs[k]
    roll = rng.randrange(4)
    if roll == 0:
        a += rng.choice([1, 4, 64, 4096]) * rng.randrange(1, 64)
    elif roll == 1:
        a -= rng.choice([4, 256, 4096]) * rng.randrange(1, 64)
    elif roll == 2:
        a ^= rng.randrange(1, 1 << 14) << VA_BITS
    else:
        name = rng.choice(list(prev.pointers))
        a = with_addr(prev.pointers[name], pointer_addr(a))
    req.addrs[k] = a & ((1 << 64) - 1)
    return req


async def round_(tb, rng, stats, problems):
    """One launch: returns the warps sent."""
    idle, stall = rng.choice([(0.0, 0.0), (0.0, 0.0), (0.2, 0.2), (0.1, 0.4)])
    mem_idle = rng.choice([0.0, 0.3])
    tb.set_stalls(idle=idle, stall=stall, mem_stall=mem_idle, mem_idle=mem_idle)
    tb.mem_latency = rng.choice([(1, 1), (1, 12), (2, 40)])
    drv = tb.driver(rng.getrandbits(32))
    name = rng.choice(sorted(KERNELS))
    k = kernel(name, drv, seed=rng.getrandbits(32), analysis=rng.random() < 0.3)
    drv.alloc_global("soak_ro", rng.randrange(256, 4096), read_only=True)
    drv.alloc_global("soak_rw", rng.randrange(256, 4096))
    drv.alloc_t3("soak_t3", rng.randrange(8, 13))
    prev = drv.launch()
    launch = drv.launch(scrub=rng.random() < 0.2)
    await tb.launch(launch, precise=rng.random() < 0.5)
    ops = list(k.ops())[:MAX_WARPS_PER_ROUND]
    warps = [(TRACE, name, to_request(op, launch, lanes=tb.lanes)) for op in ops]
    bad = [(VIOLATION, kind, req) for kind, req, _ in violations(launch, prev, rng, lanes=tb.lanes)]
    bad += [(MUTANT, name, mutate(to_request(rng.choice(ops), launch, lanes=tb.lanes), launch, prev, rng))
            for _ in range(max(1, len(ops) // 20))]
    # the last round of a chunk is cut to what is left, its violations kept
    left = stats["want"] - stats["attempts"]
    bad = bad[:left]
    warps = warps[:left - len(bad)]
    for item in bad:
        warps.insert(rng.randrange(len(warps) + 1), item)
    first = len(tb.results)
    for _, _, req in warps:
        tb.submit(req)
    await tb.drain()
    answers = tb.results[first:]
    if len(answers) != len(warps) or len(tb.resp_log) != len(warps):
        problems.append(f"{len(warps)} warps sent, {len(answers)} model answers, {len(tb.resp_log)} responses")
    for (what, kind, _), (_req, model, _cycle) in zip(warps, answers):
        got = bool(tb.resp_log.popleft()) if tb.resp_log else None
        truth = {TRACE: True, VIOLATION: False}.get(what, model.ok)
        d = stats["detail"]
        d[what] = d.get(what, 0) + 1
        if model.ok != truth:
            problems.append(f"model: {what} warp ({kind}, tag {model.tag}) judged ok={model.ok}")
        if got is None:
            continue
        if got and not truth:
            stats["accepted"] += 1
            problems.append(f"missed violation: {what} warp ({kind}, tag {model.tag}) passed, "
                            f"model cause {model.cause.name}")
        elif truth and not got:
            stats["lost"] += 1
            problems.append(f"false alarm: {what} warp ({kind}, tag {model.tag}) refused")
        if not truth:
            d["refused"] = d.get("refused", 0) + 1
    tb.resp_log.clear()
    del tb.results[first:]          # judged: keep memory flat over 10⁶ warps
    for log in (tb.present, tb.accepted, tb.answered, tb.mem_turnaround):
        log.clear()
    tb.raise_errors()
    return len(warps)


@cocotb.test()
async def soak(dut):
    count = int(os.environ.get("SOAK_COUNT", "500"))
    stats_file = os.environ.get("SOAK_STATS")
    tb = BcuTB(dut)
    tb.resp_log = RespLog(tb).oks
    await tb.reset()
    rng = random.Random(random.getrandbits(32))
    stats = {"attempts": 0, "accepted": 0, "lost": 0, "cycles": 0, "want": count,
             "detail": {"rounds": 0}}
    problems = []
    try:
        while stats["attempts"] < count and not problems:
            stats["attempts"] += await round_(tb, rng, stats, problems)
            stats["detail"]["rounds"] += 1
    finally:
        stats.pop("want")
        stats["cycles"] = round(get_sim_time("ns") / CLOCK_PERIOD_NS)
        if stats_file:
            with open(stats_file, "w") as f:
                json.dump(stats, f)
    tb.log.info("soak bcu: %s", stats)
    assert not problems, f"{len(problems)} problems; first: {problems[0]}"
    assert count < 100 or stats["detail"].get("refused", 0) > 0, "control: no warp was refused"
