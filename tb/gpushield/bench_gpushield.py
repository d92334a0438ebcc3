"""Benchmark of ``bcu``: per kernel trace, the RCache hit rates, RBT fetches per 1,000 warp
requests, the check latency and the warp requests per cycle, measured on the RTL (and
cross-checked against the golden model); plus the RCache storage computed from the design.
Area comes from ``scripts/synth.py bcu``. Run by ``make bench`` / ``scripts/bench.py gpushield``.

Conditions: every kernel is a fresh launch (caches flushed); requests back to back, ``resp``
always ready; trace sizes in PARAMS; an RBT fetch takes MEM_LATENCY cycles from ``mem_req`` to ``mem_resp``.
Two latencies per kernel, both averaged over its requests:

- ``interval``: cycles from the later of (the request presented, the previous answer) to
  its answer — once the pipeline is full, the cycles its micro-ops hold the RCache engine
  (1 per L1 hit, 2 per L2 hit, 1 per miss) or, behind a miss, the wait for that miss's
  RBT fetch (answers leave in order; docs/gpushield.md, "Micro-architecture and timing");
  plus the pipeline depth for a request that finds the unit idle;
- ``latency``: cycles from the request presented to its answer (pipeline depth, engine
  cycles and the wait behind earlier requests): what a warp waits for its check.

``warps/cycle`` counts from the first request presented to the last answer (it includes
filling the pipeline once per kernel); ``sustained`` from the first answer to the last.
"""
import json
import time

import cocotb

from hw.gpushield.core import BCU, pipeline_depth
from sw.gpushield.lsu_model import ORDER
from sw.gpushield.lsu_model import TRACE_PARAMS as PARAMS  # larger than the regression's: cold misses weigh less
from sw.gpushield.traces import KERNELS
from tb.common.bench import record
from tb.gpushield.env import BcuTB

MEM_LATENCY = 20
PAPER = {"l1_hit": "near 100 % on most kernels (4 entries)", "storage": "14.2 KB (NVIDIA config)",
         "area": "0.0858 mm2 at 45 nm"}
# the kernels with at most 4 live buffers (the L1 RCache's ways) and Type 2 lookups
FEW_BUFFERS = ("streaming", "strided", "stencil2d", "matmul", "gather_scatter", "bfs", "heap")


@cocotb.test()
async def patterns(dut):
    tb = BcuTB(dut, mem_latency=(MEM_LATENCY - 1, MEM_LATENCY - 1))  # +1: the source's cycle
    await tb.reset()
    rows = {}
    wall = time.monotonic()
    assert set(ORDER) == set(KERNELS)
    for name in ORDER:
        counters = [int(getattr(dut, c).value) for c in ("l1_hits", "l2_hits", "misses")]
        first = len(tb.results)
        p0 = len(tb.present)
        await tb.run_kernel(name, seed=1, **PARAMS[name])
        await tb.check_state(name)
        l1, l2, miss = (int(getattr(dut, c).value) - v
                        for c, v in zip(("l1_hits", "l2_hits", "misses"), counters))
        results = tb.results[first:]
        present, answered = tb.present[p0:], tb.answered[first:]
        assert len(present) == len(answered) == len(results)
        lat, prev = [], None
        for p, a in zip(present, answered):
            lat.append(a - (p if prev is None else max(p, prev)))
            prev = a
        wait = [a - p for p, a in zip(present, answered)]
        n = len(results)
        lookups = l1 + l2 + miss
        rows[name] = {
            "requests": n,
            "groups_per_request": round(sum(len(r.uops) for _, r, _ in results) / n, 2),
            "l1_hit_pct": round(100 * l1 / lookups, 1) if lookups else None,
            "l2_hit_pct": round(100 * l2 / lookups, 1) if lookups else None,
            "fetches_per_1k": round(1000 * miss / n, 1),
            "avg_latency": round(sum(lat) / n, 2),
            "avg_present_to_answer": round(sum(wait) / n, 2),
            "warps_per_cycle": round(n / (answered[-1] - present[0] + 1), 3),
            # from the first answer to the last: without the one-time pipeline fill
            "sustained_warps_per_cycle": round((n - 1) / max(1, answered[-1] - answered[0]), 3),
        }
        assert set(tb.mem_turnaround) <= {MEM_LATENCY}, set(tb.mem_turnaround)
    wall = time.monotonic() - wall
    head = (f"{'L1 hit %':>8} {'L2 hit %':>8} {'fetch/1k':>8} {'interval':>8} {'latency':>7} "
            f"{'warp/cyc':>8} {'sustain':>7} {'ids/warp':>8} {'warps':>6}")
    fmt = lambda v, spec: "—".rjust(int(spec.split('.')[0])) if v is None else format(v, spec)  # noqa: E731
    table = {"pattern": head}
    for name, r in rows.items():
        table[name] = (f"{fmt(r['l1_hit_pct'], '8.1f')} {fmt(r['l2_hit_pct'], '8.1f')} "
                       f"{r['fetches_per_1k']:8.1f} {r['avg_latency']:8.2f} {r['avg_present_to_answer']:7.2f} "
                       f"{r['warps_per_cycle']:8.3f} {r['sustained_warps_per_cycle']:7.3f} "
                       f"{r['groups_per_request']:8.2f} {r['requests']:6d}")
    bits = BCU.storage_bits()
    hit = [r["l1_hit_pct"] for r in rows.values() if r["l1_hit_pct"] is not None]
    record(**table,
           mem_latency_cycles=MEM_LATENCY,
           pipeline_depth_cycles=pipeline_depth(tb.lanes),
           l1_hit_pct_median=sorted(hit)[len(hit) // 2],
           kernels_l1_hit_above_95pct=f"{sum(h > 95 for h in hit)} of {len(hit)}",
           paper_l1_hit=PAPER["l1_hit"],
           storage_bytes=round((bits["l1"] + bits["l2"]) / 8),
           storage_detail=f"L1 {bits['l1']} bits + L2 {bits['l2']} bits",
           paper_storage=PAPER["storage"],
           paper_area=PAPER["area"],
           sim_cycles_per_second=round(tb.cycle / wall),
           patterns=rows)


# An SRAM bit at 45 nm, an ESTIMATE: CACTI's 6T cell of 146 F² (0.30 µm² at F = 45 nm),
# doubled for decoders, sense amplifiers and write drivers. The L2's tags are searched
# associatively (CAM cells, larger), so the SRAM variant below is optimistic.
SRAM_UM2_PER_BIT = 0.60
PAPER_AREA_MM2 = 0.0858             # the paper's added structures, whole GPU, FreePDK45 + SRAM
PAPER_STORAGE_BYTES = 14.2 * 1024   # the paper's RCache storage, whole GPU (NVIDIA config)


def _dff_ge():
    from scripts.synth import LIBERTY
    text = LIBERTY.read_text()
    cell = text[text.index("cell(DFF)"):]
    return float(cell.split("area :", 1)[1].split(";", 1)[0])


def area_like_for_like(storage_bits, area_um2, dff_ge, um2_per_ge=0.798,
                       sram_um2_per_bit=SRAM_UM2_PER_BIT):
    """The BCU's area next to the paper's 0.0858 mm² (whole GPU, storage in SRAM): per
    unit and × the units a GPU has (the paper's 14.2 KB of RCache storage over ours per
    unit), with the RCache storage as our flip-flops (measured) or as SRAM (estimated)."""
    if storage_bits <= 0 or area_um2 <= 0:
        raise ValueError("storage_bits and area_um2 must be positive")
    storage_ff = storage_bits * dff_ge * um2_per_ge     # the storage flip-flops alone
    logic = max(area_um2 - storage_ff, 0.0)
    per_unit_sram = logic + storage_bits * sram_um2_per_bit
    units = round(PAPER_STORAGE_BYTES / (storage_bits / 8))
    mm2 = 1e-6
    return {
        "units_per_gpu": units,
        "unit_mm2_flip_flops": round(area_um2 * mm2, 4),
        "unit_storage_flip_flops_mm2": round(storage_ff * mm2, 4),
        "unit_mm2_sram_estimate": round(per_unit_sram * mm2, 4),
        "gpu_mm2_flip_flops": round(units * area_um2 * mm2, 3),
        "gpu_mm2_sram_estimate": round(units * per_unit_sram * mm2, 3),
        "paper_gpu_mm2": PAPER_AREA_MM2,
    }


def bench():
    from tb.common.bench import run_bench

    figures = run_bench("bcu", "tb.gpushield.bench_gpushield", "patterns")
    # the per-pattern numbers go to the JSON report; the table lines are printed
    rows = figures.pop("patterns")
    # the spread over the kernels whose live buffers fit the L1 RCache's 4 ways, and the
    # slowest kernel of all, for the README's headline (docs/bench.md)
    few = [rows[name] for name in FEW_BUFFERS]
    warps = [r["warps_per_cycle"] for r in few]
    l1 = [r["l1_hit_pct"] for r in few]
    figures["few_buffers_warps_per_cycle_range"] = f"{min(warps):.2f}–{max(warps):.2f}"
    figures["few_buffers_l1_hit_pct_range"] = f"{min(l1):.1f}–{max(l1):.1f}"
    slowest = min(rows, key=lambda name: rows[name]["warps_per_cycle"])
    figures["slowest_kernel"] = f"{slowest}: {rows[slowest]['warps_per_cycle']:.3f} warps/cycle"
    from tb.common.sim import SIM_BUILD
    out = SIM_BUILD / "reports" / "bench" / "gpushield_patterns.json"
    out.write_text(json.dumps(rows, indent=1))
    # the area of `make synth BLOCK=bcu` (tens of minutes, not rerun here): its cached report,
    # else the row docs/area.md keeps; only if it is of the BCU as the code builds it now
    from scripts.synth import AREA_DOC, design_rows
    ((_, area, current),) = design_rows(["bcu"], AREA_DOC.read_text())
    if area is not None and current:
        figures["area_vs_paper"] = area_like_for_like(
            BCU.storage_bits()["l1"] + BCU.storage_bits()["l2"], area["area_um2_45nm"], _dff_ge())
    else:
        figures["area_vs_paper"] = "run `make synth BLOCK=bcu` first"
    # the compiler's Type 1 and the load/store-path overhead: Python models over the same
    # traces (PARAMS, seed 1), no simulator (sw/gpushield/lsu_model.py; an estimate)
    from sw.gpushield.lsu_model import figures as lsu_figures
    lsu = lsu_figures(params=PARAMS, seed=1)
    for key in ("lsu_overhead_pct", "lsu_overhead_mean_pct", "lsu_overhead_pct_all_checked",
                "lsu_overhead_mean_pct_all_checked", "lsu_overhead_warm_pct", "lsu_overhead_warm_pct_all_checked",
                "type1_share", "type1_lookups_saved"):
        figures[key] = lsu[key]
    figures["paper_overhead"] = "0.8 % average over Rodinia (whole kernels)"
    return {"bcu": figures}
