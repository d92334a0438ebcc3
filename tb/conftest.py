"""pytest hooks for the cocotb regression: a summary table of every cocotb test run
(test, result, simulated cycles, wall seconds), also written to
``sim_build/reports/sim_summary.json``. With ``make sim JOBS=n`` (pytest-xdist) the tests run
in worker processes; each pytest test leaves its cocotb results in
``sim_build/reports/cases/`` and the controlling process sums them up.

The summary counts only the files of its own session: the controller names the session
(``SIM_SESSION``, inherited by the workers it starts) and every result carries it, so a
``make soak`` or another ``make sim`` writing into the same ``sim_build`` at the same time is
not counted (a file from an earlier run stays, for ``make bench BLOCK=simspeed``'s "last
regression" figures, and is skipped too)."""
import json
import os
import time

from tb.common.sim import CASES_DIR, SIM_BUILD, CaseResult


def _controller(config):
    return not hasattr(config, "workerinput")


def pytest_configure(config):
    # before pytest-xdist starts its workers (at session start), so that they inherit it
    if _controller(config):
        os.environ["SIM_SESSION"] = f"{os.getpid()}-{time.time_ns()}"


def session_results(cases_dir, session):
    """The cocotb results of *session* among the case files in *cases_dir*."""
    if not cases_dir.exists():
        return []
    return [r for f in sorted(cases_dir.glob("*.json")) for r in (CaseResult(**c) for c in json.loads(f.read_text()))
            if r.session == session]


def pytest_terminal_summary(terminalreporter):
    if not _controller(terminalreporter.config):
        return
    results = session_results(CASES_DIR, os.environ.get("SIM_SESSION", ""))
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
