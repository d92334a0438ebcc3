"""pytest hooks for the cocotb regression: a summary table of every cocotb test run
(test, result, simulated cycles, wall seconds), also written to
``sim_build/reports/sim_summary.json``."""
import json

from tb.common.sim import RESULTS, SIM_BUILD


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    tr = terminalreporter
    width = max(len(r.test) for r in RESULTS)
    tr.section("cocotb regression summary")
    tr.write_line(f"{'test':<{width}}  result  {'cycles':>10}  {'wall s':>7}")
    for r in RESULTS:
        tr.write_line(f"{r.test:<{width}}  {'PASS' if r.passed else 'FAIL':<6}  {r.cycles:>10}  {r.seconds:>7.1f}")
    passed = sum(r.passed for r in RESULTS)
    tr.write_line(f"{passed} of {len(RESULTS)} cocotb tests passed, "
                  f"{sum(r.cycles for r in RESULTS)} cycles simulated")
    reports = SIM_BUILD / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "sim_summary.json").write_text(json.dumps([r.__dict__ for r in RESULTS], indent=1))
