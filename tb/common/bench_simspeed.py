"""Benchmark of simulation speed (``make bench BLOCK=simspeed``; issue 17 item 5). Per design:
the free-running Verilator model (clock only, :func:`tb.common.simspeed.free_running`; also
with every stream input held valid/ready; and the same main linked against the regression's
own model, :func:`tb.common.simspeed.free_running_vpi`; and cocotb with
the clock only, :func:`tb.common.simspeed.cocotb_clock_only`), the driven
speed of one representative cocotb test on the regression's own build
(:func:`tb.common.simspeed.driven`), their ratio, and the last regression's speed on the
design when its results are still in ``sim_build/``. The target: driven within 2x of
free-running. For the designs of :data:`VISIBILITY_DESIGNS`, also the free-running speed and
C++ build time with the registers, memories and ports public (the regression's choice,
:mod:`tb.common.visibility`) and with every net public (cocotb's default). Figures are
simulated cycles per wall second on the machine that ran it. ``SIMSPEED_DESIGNS=a,b``
limits the designs.

Prints a table, writes ``sim_build/reports/simspeed.json`` and returns one entry,
``simspeed``, for docs/bench.md."""
import json
import os
import sys

from tb.common.simspeed import DESIGNS, cocotb_clock_only, driven, free_running, free_running_vpi, regression

FREE_SECONDS = 0.5       # each free-running loop is sized to run about this long …
FREE_RUNS = 3            # … and the fastest of this many runs counts (the machine is shared)
PROBE_CYCLES = 2_000
# every net public costs minutes of C++ per large design: compared on three designs only
VISIBILITY_DESIGNS = ("aes256", "gcm_core", "bcu")


def _free(design, streams, run=free_running, **kw):
    params = DESIGNS[design].params
    probe = run(design, params, PROBE_CYCLES, streams, **kw)
    cycles = max(PROBE_CYCLES, int(probe["cycles_per_second"] * FREE_SECONDS))
    result = max((run(design, params, cycles, streams, **kw) for _ in range(FREE_RUNS)),
                 key=lambda r: r["cycles_per_second"])
    result["build_seconds"] = probe.get("build_seconds", 0.0)
    return result


def measure(design):
    """One design's row: every figure, rounded for the report."""
    idle, streams = _free(design, False), _free(design, True)
    run = driven(design)            # builds the regression's model first if it is stale
    vpi = _free(design, False, free_running_vpi)
    floor = cocotb_clock_only(design)
    last = regression(design)
    ratio = idle["cycles_per_second"] / run["cycles_per_second"] if run["cycles_per_second"] else None
    return {"free_cycles_per_s": round(idle["cycles_per_second"]),
            "free_streams_cycles_per_s": round(streams["cycles_per_second"]),
            "free_vpi_model_cycles_per_s": round(vpi["cycles_per_second"]),
            "cocotb_clock_only_cycles_per_s": round(floor["cycles_per_second"]),
            "driven_cycles_per_s": round(run["cycles_per_second"]),
            "free_over_driven": round(ratio, 1) if ratio else None,
            "driven_test": run["test"], "driven_cycles": run["cycles"], "driven_seconds": run["seconds"],
            "regression_cycles_per_s": round(last["cycles_per_second"]) if last else None,
            "regression_cycles": last["cycles"] if last else None,
            "regression_seconds": last["seconds"] if last else None,
            "free_build_seconds": idle["build_seconds"]}


def measure_visibility(design):
    """Free-running cycles/s and C++ build seconds of *design* at each visibility (a build
    time of 0 means it was cached: delete ``sim_build/verilator/<design>-free*`` to time it)."""
    row = {}
    for visibility in ("none", "state", "all"):
        r = _free(design, False, visibility=visibility)
        row[visibility] = {"cycles_per_s": round(r["cycles_per_second"]),
                           "build_seconds": r["build_seconds"]}
    return row


def visibility_table(rows):
    md = ["| design | nothing public | registers, memories, ports (the regression) | every net (cocotb's default) |",
          "|---|---:|---:|---:|"]
    for design, r in rows.items():
        cells = [f"{r[v]['cycles_per_s']:,} cycles/s, built in {r[v]['build_seconds']:.0f} s"
                 for v in ("none", "state", "all")]
        md.append(f"| `{design}` | {' | '.join(cells)} |")
    return md


def table(rows):
    """The report as Markdown lines."""
    md = ["| design | free-running cycles/s | free, streams valid/ready | free, regression's VPI model | "
          "cocotb, clock only | driven cycles/s (test) | free / driven | regression cycles/s |",
          "|---|---:|---:|---:|---:|---|---:|---:|"]
    for design, r in rows.items():
        last = f"{r['regression_cycles_per_s']:,}" if r["regression_cycles_per_s"] else "not known"
        speeds = [f"{r[k]:,}" for k in ("free_cycles_per_s", "free_streams_cycles_per_s",
                                        "free_vpi_model_cycles_per_s", "cocotb_clock_only_cycles_per_s")]
        md.append(f"| `{design}` | {' | '.join(speeds)} | {r['driven_cycles_per_s']:,} (`{r['driven_test']}`) | "
                  f"{r['free_over_driven']} | {last} |")
    return md


def _designs():
    chosen = [d.strip() for d in os.environ.get("SIMSPEED_DESIGNS", "").split(",") if d.strip()]
    unknown = sorted(set(chosen) - set(DESIGNS))
    if unknown:
        raise ValueError(f"SIMSPEED_DESIGNS: unknown {unknown}; known: {', '.join(DESIGNS)}")
    return chosen or list(DESIGNS)


def bench():
    from tb.common.sim import SIM_BUILD

    rows, seen = {}, {}
    for design in _designs():
        print(f"[simspeed] {design} …", file=sys.stderr, flush=True)
        rows[design] = measure(design)
        if design in VISIBILITY_DESIGNS:
            seen[design] = measure_visibility(design)
    print("\n".join(["", *table(rows), "", *visibility_table(seen)]))
    out = SIM_BUILD / "reports" / "simspeed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"designs": rows, "visibility": seen}, indent=1))
    within = [d for d, r in rows.items() if r["free_over_driven"] and r["free_over_driven"] <= 2]
    return {"simspeed": {**rows, "visibility": seen, "within_2x": within,
                         "target": "driven within 2x of free-running"}}
