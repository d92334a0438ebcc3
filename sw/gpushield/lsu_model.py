"""Cycle model of an SM's load/store path with and without the BCU: the overhead of
GPUShield's checks against no checking, per trace. An ESTIMATE: a model, not the RTL.

What is modelled (docs/gpushield.md, "Overhead against no checking"):

- warp memory instructions issue in order, at most one per ``issue_interval`` cycles and
  at most ``in_flight`` of them outstanding (issued, not yet complete);
- address generation and coalescing take ``agu`` cycles; then the TLB (``tlb_hit``
  cycles, plus ``tlb_miss`` on a miss of any page the warp touches; fully associative,
  LRU) and the L1D: one 128-byte line per cycle through its port, ``l1d_hit`` cycles on
  a hit, ``l1d_miss`` on a miss (set-associative, LRU; loads allocate, stores write
  through without allocating and are acknowledged after ``l1d_hit``);
- the BCU in parallel: it gets the warp's addresses when address generation is done and
  answers in the cycle the RTL's documented timing gives
  (:class:`~sw.gpushield.timing.EngineTiming`: the front's registers, one micro-op per id
  group through the non-blocking engine — 1 cycle per L1 RCache hit, 2 per L2 hit, 1 per
  miss, up to 4 RBT fetches outstanding, answers in order through the answer queue — then
  the checker's 3 registers), an RBT fetch taking ``rbt_fetch`` cycles from ``mem_req`` to
  ``mem_resp``; hits, misses and encrypted ids from the golden model's RCaches
  (:class:`~sw.gpushield.model.BCUModel`) over the trace;
- an instruction completes when both its memory access and its check are done: a load's
  writeback and a store's release wait for the check; a violating instruction is
  squashed (load data dropped, store not performed);
- Type 1 instructions bypass the BCU (the LSU decodes the pointer type; ``type1_bypass``).

Not modelled: non-memory instructions (the overhead is over the memory-instruction stream
alone, an upper bound on a kernel's), data dependencies between instructions, bandwidth
beyond the L1D port and the in-flight limit, other SMs. ``python -m sw.gpushield.lsu_model``
prints the table; :func:`figures` returns it as a dict.
"""
import heapq
import random
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

from hw.gpushield.engine import MAX_FETCHES, QUEUE_DEPTH
from hw.gpushield.front import front_registers

from .driver import Driver
from .model import BCUModel
from .timing import EngineTiming
from .traces import KERNELS, LANES, kernel, to_request

__all__ = ["LsuConfig", "BcuTiming", "LsuOp", "Run", "annotate", "trace_ops", "simulate", "overhead_pct", "table",
           "kernel_figures", "figures", "TRACE_PARAMS", "ORDER", "PAPER", "main"]

# The kernels and trace sizes of the BCU benchmark (tb/gpushield/bench_gpushield.py imports them), seed 1
ORDER = ["streaming", "strided", "stencil2d", "matmul", "gather_scatter", "bfs", "heap",
         "type3", "many_buffers", "mixed_ids", "local"]
TRACE_PARAMS = {"streaming": {"n": 16384}, "strided": {"n": 8192}, "stencil2d": {"height": 66},
                "matmul": {"n": 96}, "gather_scatter": {"n": 4096}, "bfs": {"nodes": 4096},
                "heap": {"warps": 512}, "type3": {"log2": 16}, "many_buffers": {"n": 4096},
                "mixed_ids": {"n": 4096}, "local": {"threads": 64, "words": 16}}
SEED = 1
# From the summary of the paper in the project's seeds (MacSim, NVIDIA configuration with a
# 4-entry 1-cycle L1 and a 64-entry 3-cycle L2 RCache)
PAPER = {"rodinia_avg_overhead_pct": 0.8,
         "rcache_sensitive": "streamcluster (many requests, high D-cache hit rate): the 1-cycle bubble of an "
                             "L1 RCache miss weighs most; no figure given",
         "two_kernels": "Intel, 21 pairs: < 0.3 % average; bfs + nn inter-core 6.2 %"}


def _nonneg(obj, names):
    for n in names:
        v = getattr(obj, n)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{type(obj).__name__}.{n} must be an int >= 0, not {v!r}")


def _pow2(what, v):
    if not isinstance(v, int) or v < 1 or v & (v - 1):
        raise ValueError(f"{what} must be a power of two, not {v!r}")


@dataclass(frozen=True)
class LsuConfig:
    """The load/store path. Latencies in cycles (assumed values of a recent GPU's order
    of magnitude, not measured ones)."""
    agu: int = 2                 # address generation and coalescing
    tlb_hit: int = 1
    tlb_miss: int = 80           # added on a miss (second-level TLB / walk)
    tlb_entries: int = 32
    page_bytes: int = 64 * 1024
    l1d_hit: int = 28
    l1d_miss: int = 200          # an L2 access
    l1d_bytes: int = 32 * 1024
    l1d_ways: int = 4
    line_bytes: int = 128
    in_flight: int = 32          # memory instructions outstanding in the SM
    issue_interval: int = 1
    type1_bypass: bool = True    # Type 1 never goes to the BCU

    def __post_init__(self):
        _nonneg(self, ("agu", "tlb_hit", "tlb_miss", "l1d_hit", "l1d_miss", "issue_interval"))
        for n in ("tlb_entries", "l1d_ways", "in_flight"):
            v = getattr(self, n)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"LsuConfig.{n} must be an int >= 1, not {v!r}")
        for n in ("page_bytes", "l1d_bytes", "line_bytes"):
            _pow2(f"LsuConfig.{n}", getattr(self, n))
        if self.l1d_bytes < self.line_bytes * self.l1d_ways:
            raise ValueError("LsuConfig: the L1D must hold at least one set")


@dataclass(frozen=True)
class BcuTiming:
    """The BCU's settings (32 lanes by default); the timing rules themselves are those of
    :class:`~sw.gpushield.timing.EngineTiming` (docs/gpushield.md, "Micro-architecture and
    timing"). ``rbt_fetch``: cycles from an RBT fetch's ``mem_req`` to its ``mem_resp``."""
    front_registers: int = front_registers(LANES)
    queue_depth: int = QUEUE_DEPTH
    max_fetches: int = MAX_FETCHES
    rbt_fetch: int = 200         # an RBT entry comes from GPU memory through the L2, like an L1D miss

    def __post_init__(self):
        _nonneg(self, ("front_registers", "rbt_fetch"))
        for n in ("queue_depth", "max_fetches"):
            v = getattr(self, n)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"BcuTiming.{n} must be an int >= 1, not {v!r}")

    def engine(self):
        """A fresh (idle) :class:`~sw.gpushield.timing.EngineTiming` of these settings."""
        return EngineTiming(self.rbt_fetch, self.front_registers, self.queue_depth, self.max_fetches)


@dataclass
class LsuOp:
    """One warp memory instruction as the LSU sees it."""
    addrs: list                 # byte addresses of the active lanes
    size: int = 4               # bytes per lane
    store: bool = False
    checked: bool = True        # False: Type 1 (proven by the compiler)
    levels: list = field(default_factory=lambda: ["L1"])   # the BCU's micro-ops: "direct", "L1", "L2", "mem"
    ok: bool = True             # the BCU's verdict
    eids: list = None           # the micro-ops' encrypted ids (None: no two share an RCache entry)


@dataclass
class Run:
    cycles: int                 # the last instruction's completion (the first issues at cycle 0)
    issue: list
    complete: list
    squashed: list              # indices of squashed instructions
    performed_stores: list      # indices of stores that reached the L1D
    l1d_hits: int = 0
    l1d_lines: int = 0
    tlb_misses: int = 0
    bcu_requests: int = 0


class _Lru:
    """A set-associative LRU array of tags (a fully associative one has one set)."""

    def __init__(self, sets, ways):
        self.sets, self.ways = sets, ways
        self.data = [OrderedDict() for _ in range(sets)]

    def lookup(self, tag, allocate=True):
        s = self.data[tag % self.sets]
        if tag in s:
            s.move_to_end(tag)
            return True
        if allocate:
            s[tag] = None
            if len(s) > self.ways:
                s.popitem(last=False)
        return False


def simulate(ops, config=None, bcu=None, warmup=()):
    """Run *ops* (a list of :class:`LsuOp`) through the load/store path of *config*; with
    the BCU of timing *bcu* (a :class:`BcuTiming`), or without any checking if None.
    *warmup* ops run first, untimed, to warm the TLB and L1D; the pipeline drains before
    *ops* start (their RCache levels must come from a model that saw the warmup too). The
    BCU is anything with an ``engine()`` giving an idle timer whose
    ``present_uops(cycle, [(level, eid)]) -> answer cycle`` takes requests in order."""
    cfg = config or LsuConfig()
    tlb = _Lru(1, cfg.tlb_entries)
    l1d = _Lru(cfg.l1d_bytes // (cfg.line_bytes * cfg.l1d_ways), cfg.l1d_ways)
    for timed in (False, True):
        run = Run(0, [], [], [], [])
        outstanding = []        # completion times of the instructions in flight (min-heap)
        issue = port_free = 0
        engine = bcu.engine() if bcu is not None else None     # idle: the pipeline drained
        for i, op in enumerate(ops if timed else warmup):
            if i:
                issue += cfg.issue_interval
            if len(outstanding) >= cfg.in_flight:
                issue = max(issue, heapq.heappop(outstanding))
            ready = issue + cfg.agu
            # the check, in parallel with translation and the L1D
            checked = bcu is not None and (op.checked or not cfg.type1_bypass)
            if checked:
                eids = op.eids if op.eids is not None else [None] * len(op.levels)
                if len(eids) != len(op.levels):
                    raise ValueError(f"op {i}: {len(op.levels)} RCache levels but {len(eids)} encrypted ids")
                bcu_answer = engine.present_uops(ready, zip(op.levels, eids))
                run.bcu_requests += 1
            squash = checked and not op.ok
            # translation: one lookup per page the warp touches
            pages = sorted({a // cfg.page_bytes for a in op.addrs} |
                           {(a + op.size - 1) // cfg.page_bytes for a in op.addrs})
            missed = [p for p in pages if not tlb.lookup(p)]
            run.tlb_misses += len(missed)
            translated = ready + cfg.tlb_hit + (cfg.tlb_miss if missed else 0)
            # the L1D port: one line per cycle, in order
            lines = sorted({a // cfg.line_bytes for a in op.addrs} |
                           {(a + op.size - 1) // cfg.line_bytes for a in op.addrs})
            start = max(translated, port_free)
            port_free = start + len(lines)
            done = ready
            for j, line in enumerate(lines):
                if op.store:
                    # a store's tag lookup; the write (LRU update) happens only if the check passes
                    hit = line in l1d.data[line % l1d.sets]
                    if not squash:
                        l1d.lookup(line, allocate=False)
                    latency = cfg.l1d_hit
                else:
                    hit = l1d.lookup(line)
                    latency = cfg.l1d_hit if hit else cfg.l1d_miss
                run.l1d_hits += hit
                done = max(done, start + j + latency)
            run.l1d_lines += len(lines)
            complete = max(done, bcu_answer) if checked else done
            if squash:
                run.squashed.append(i)
            elif op.store:
                run.performed_stores.append(i)
            run.issue.append(issue)
            run.complete.append(complete)
            heapq.heappush(outstanding, complete)
            run.cycles = max(run.cycles, complete)
    return run


def overhead_pct(with_bcu, without):
    """``100 (cycles with the BCU / cycles without − 1)``."""
    if without.cycles <= 0:
        raise ValueError("the run without the BCU has no cycles")
    return 100 * (with_bcu.cycles / without.cycles - 1)


def annotate(warp_ops, launch, driver, lanes=LANES):
    """:class:`LsuOp`s of trace ops under *launch*: addresses, and the BCU's verdict and
    RCache levels from a fresh golden model (caches flushed by the launch) in trace order."""
    model = BCUModel(driver.mem.read128, lanes)
    model.rbt_base, model.kernel_id, model.id_key = launch.rbt_base, launch.kernel_id, launch.id_key
    model.launch()
    out = []
    for op in warp_ops:
        res = model.check(to_request(op, launch, lanes=lanes))
        addrs = [launch.buffers[b].base + off for b, off in (x for x in op.lanes if x is not None)]
        out.append(LsuOp(addrs, 1 << op.size_log2, op.store, not op.unchecked,
                         [u.level for u in res.uops], res.ok, [u.eid for u in res.uops]))
    return out, model


def trace_ops(name, analysis, seed=SEED, params=None, passes=1):
    """``(LsuOps, golden model after the trace, kernel)`` of kernel *name*, compiled with
    or without the bounds analysis; *passes* > 1 repeats the trace within the one launch."""
    drv = Driver(random.Random(seed))
    k = kernel(name, drv, seed=seed, analysis=analysis, **(params or {}))
    launch = drv.launch()
    ops, model = annotate(list(k.ops()) * passes, launch, drv)
    return ops, model, k


def kernel_figures(name, config=None, bcu=None, seed=SEED, params=None):
    """One trace without the BCU, with the BCU and every instruction checked, and with the
    BCU and the analysis's Type 1: cycles, overheads, Type 1 share and lookups saved.
    ``*_warm`` overheads are those of a second pass over the trace in the same launch
    (RCaches, TLB and L1D warm from the first, pipeline drained in between)."""
    bcu = bcu or BcuTiming()
    checked2, _, k = trace_ops(name, False, seed, params, passes=2)
    typed2, _, _ = trace_ops(name, True, seed, params, passes=2)
    if [(o.addrs, o.store) for o in checked2] != [(o.addrs, o.store) for o in typed2]:
        raise AssertionError(f"{name}: the analysis changed the access stream")
    n = len(checked2) // 2
    checked, typed = checked2[:n], typed2[:n]       # a model's first pass = the trace alone
    runs = {}
    for label, ops1, ops2, timing in (("base", checked, checked2, None), ("all", checked, checked2, bcu),
                                      ("type1", typed, typed2, bcu)):
        runs[label] = (simulate(ops1, config, timing), simulate(ops2[n:], config, timing, warmup=ops2[:n]))

    def warm(label):
        return round(overhead_pct(runs[label][1], runs["base"][1]), 2)

    def lookups(ops):
        return sum(len([lv for lv in o.levels if lv != "direct"]) for o in ops if o.checked)

    base, all_checked, with_type1 = runs["base"][0], runs["all"][0], runs["type1"][0]
    return {
        "instructions": len(k.describe().accesses),
        "warp_accesses": n,
        "type1_share": round(sum(not o.checked for o in typed) / n, 4),
        "type1_lookups_saved": lookups(checked) - lookups(typed),
        "rbt_fetches_saved": sum(o.levels.count("mem") for o in checked if o.checked)
        - sum(o.levels.count("mem") for o in typed if o.checked),
        "l1d_hit_pct": round(100 * base.l1d_hits / base.l1d_lines, 1),
        "rcache_l1_hit_pct": (round(100 * sum(o.levels.count("L1") for o in checked) / lookups(checked), 1)
                              if lookups(checked) else None),
        "cycles_no_bcu": base.cycles,
        "cycles_bcu_all_checked": all_checked.cycles,
        "cycles_bcu": with_type1.cycles,
        "overhead_pct_all_checked": round(overhead_pct(all_checked, base), 2),
        "overhead_pct": round(overhead_pct(with_type1, base), 2),
        "overhead_pct_all_checked_warm": warm("all"),
        "overhead_pct_warm": warm("type1"),
    }


def figures(config=None, bcu=None, seed=SEED, params=None):
    """Every trace (:data:`ORDER`, sizes :data:`TRACE_PARAMS`) with and without the BCU:
    ``{"traces": {name: kernel_figures}, "lsu_overhead_pct": {name: pct}, ...}``."""
    config, bcu = config or LsuConfig(), bcu or BcuTiming()
    params = TRACE_PARAMS if params is None else params
    rows = {name: kernel_figures(name, config, bcu, seed, params.get(name)) for name in ORDER}
    assert set(ORDER) == set(KERNELS), "a kernel is missing from ORDER"
    mean = lambda key: round(sum(r[key] for r in rows.values()) / len(rows), 2)  # noqa: E731
    return {
        "lsu_overhead_pct": {n: r["overhead_pct"] for n, r in rows.items()},
        "lsu_overhead_pct_all_checked": {n: r["overhead_pct_all_checked"] for n, r in rows.items()},
        "lsu_overhead_mean_pct": mean("overhead_pct"),
        "lsu_overhead_mean_pct_all_checked": mean("overhead_pct_all_checked"),
        "lsu_overhead_warm_pct": {n: r["overhead_pct_warm"] for n, r in rows.items()},
        "lsu_overhead_warm_pct_all_checked": {n: r["overhead_pct_all_checked_warm"] for n, r in rows.items()},
        "type1_share": {n: r["type1_share"] for n, r in rows.items()},
        "type1_lookups_saved": {n: r["type1_lookups_saved"] for n, r in rows.items()},
        "paper": PAPER,
        "lsu_config": asdict(config),
        "bcu_timing": asdict(bcu),
        "traces": rows,
    }


def table(figs):
    """The figures as text lines."""
    head = (f"{'trace':15s} {'instr':>5s} {'warps':>6s} {'Type 1':>7s} {'lookups':>7s} {'L1D hit':>7s} "
            f"{'RC L1':>6s} {'no BCU':>7s} | {'all checked: ovh %':>18s} {'warm':>7s} | "
            f"{'with Type 1: ovh %':>18s} {'warm':>7s}")
    lines = [head, "-" * len(head)]
    for name, r in figs["traces"].items():
        rc = "—" if r["rcache_l1_hit_pct"] is None else f"{r['rcache_l1_hit_pct']:.1f}"
        lines.append(f"{name:15s} {r['instructions']:5d} {r['warp_accesses']:6d} {100 * r['type1_share']:6.1f}% "
                     f"{r['type1_lookups_saved']:7d} {r['l1d_hit_pct']:6.1f}% {rc:>6s} {r['cycles_no_bcu']:7d} | "
                     f"{r['overhead_pct_all_checked']:18.2f} {r['overhead_pct_all_checked_warm']:7.2f} | "
                     f"{r['overhead_pct']:18.2f} {r['overhead_pct_warm']:7.2f}")
    lines.append(f"{'mean':15s} {'':>52s} | {figs['lsu_overhead_mean_pct_all_checked']:18.2f} {'':7s} | "
                 f"{figs['lsu_overhead_mean_pct']:18.2f}")
    lines += [
        f"paper: {PAPER['rodinia_avg_overhead_pct']} % average over Rodinia (whole kernels, with its compiler's "
        f"Type 1); RCache-sensitive: {PAPER['rcache_sensitive']}; two kernels: {PAPER['two_kernels']}",
        "Type 1 = share of warp accesses the analysis proves; lookups = Type 2 RCache lookups that saves; "
        "RC L1 = L1 RCache hits, all checked; warm = a second pass in the same launch",
        "ESTIMATE: a cycle model over the memory-instruction stream alone (docs/gpushield.md, "
        "'Overhead against no checking')"]
    return lines


def main():
    figs = figures()
    print("\n".join(table(figs)))
    print(f"LSU: {figs['lsu_config']}")
    print(f"BCU: {figs['bcu_timing']}")


if __name__ == "__main__":
    main()
