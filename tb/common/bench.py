"""Benchmark plumbing: cocotb benchmarks write their figures as JSON to ``$BENCH_OUT``;
the host side (``bench()`` functions run by ``scripts/bench.py``) runs them through the
same cached Verilator build as the regression and reads the figures back."""
import json
import os
import time
from pathlib import Path

__all__ = ["record", "run_bench", "provenance"]


def record(**figures):
    """Called inside a cocotb benchmark: add *figures* to this run's JSON output."""
    path = Path(os.environ["BENCH_OUT"])
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(figures)
    path.write_text(json.dumps(data, indent=1))


def run_bench(design, test_module, testcase=None, params=None):
    """Run cocotb benchmark(s) of *test_module* on *design*; return the recorded figures
    plus the wall time of the run."""
    from tb.common.sim import SIM_BUILD, run

    out = SIM_BUILD / "reports" / "bench" / f"{test_module.rsplit('.', 1)[-1]}-{testcase or 'all'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    os.environ.setdefault("PYTEST_CURRENT_TEST", f"bench::{test_module}::{testcase or 'all'} (call)")
    start = time.monotonic()
    run(design, test_module, params=params, testcase=testcase, extra_env={"BENCH_OUT": str(out)})
    figures = json.loads(out.read_text())
    figures["wall_seconds"] = round(time.monotonic() - start, 1)
    figures["provenance"] = provenance(design, params)
    return figures


def provenance(design, params=None):
    """What a figure was measured on: the design, its parameters and its netlist digest
    (docs/bench.md marks the figure stale once the design's netlist changes)."""
    from scripts.verilog import netlist_digest

    return {"design": design, "params": dict(params or {}), "netlist": netlist_digest(design, params)}
