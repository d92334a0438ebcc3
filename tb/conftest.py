"""pytest hooks for the cocotb regression: a summary table of every cocotb test run
(test, result, simulated cycles, wall seconds), also written to
``sim_build/reports/sim_summary.json``. With ``make sim JOBS=n`` (pytest-xdist) the tests run
in worker processes; each pytest test leaves its cocotb results in
``sim_build/reports/cases/`` and the controlling process sums them up."""
import json
import os
import shutil

from tb.common.sim import CASES_DIR, SIM_BUILD, CaseResult


def _controller(config):
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if _controller(session.config) and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(CASES_DIR, ignore_errors=True)


def pytest_terminal_summary(terminalreporter):
    if not _controller(terminalreporter.config) or not CASES_DIR.exists():
        return
    results = [CaseResult(**c) for f in sorted(CASES_DIR.glob("*.json"))
               for c in json.loads(f.read_text())]
    if not results:
        return
    tr = terminalreporter
    width = max(len(r.test) for r in results)
    tr.section("cocotb regression summary")
    tr.write_line(f"{'test':<{width}}  result  {'cycles':>10}  {'wall s':>7}")
    for r in results:
        tr.write_line(f"{r.test:<{width}}  {'PASS' if r.passed else 'FAIL':<6}  {r.cycles:>10}  {r.seconds:>7.1f}")
    passed = sum(r.passed for r in results)
    tr.write_line(f"{passed} of {len(results)} cocotb tests passed, "
                  f"{sum(r.cycles for r in results)} cycles simulated")
    reports = SIM_BUILD / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "sim_summary.json").write_text(json.dumps([r.__dict__ for r in results], indent=1))
