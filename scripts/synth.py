"""Yosys synthesis area report (``make synth [BLOCK=<design or folder>]``).

Each design is converted to Verilog, synthesised flat with Debian's Yosys onto
``scripts/synth/generic_gates.lib`` and reported as: cells by type, flip-flops, area in
NAND2-equivalent gates (GE), the same area in µm² at 45 nm (NanGate45 NAND2_X1 = 0.798 µm²)
and the longest combinational path in gate levels (Yosys ``ltp``). Results are cached per
Verilog text in ``sim_build/reports/area/<design>.json``; the table goes to the screen and to
``sim_build/reports/area.{json,md}``.

Two figures per design, from two mappings of the same generic netlist:

- ``area_ge_enable_muxes``: every flip-flop is a plain D flip-flop, an enable costs a MUX2
  in front of it (the conservative figure; what this report gave before clock gating).
- ``area_ge`` (the headline): registers that share one enable are clock-gated, as an ASIC
  flow's automatic clock-gating insertion does: a group of at least ``ICG_MIN_BITS``
  flip-flops with the same clock and enable becomes plain flip-flops behind one integrated
  clock-gating cell (``ICG``: NanGate45 CLKGATETST_X1, 5.0 GE). Smaller groups keep their
  MUX2. The rewrite is done on Yosys's JSON netlist by :func:`clock_gate`.
"""
import argparse
import hashlib
import json
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hw.designs import available, by_folder  # noqa: E402
from scripts.verilog import generate, netlist_key, param_suffix  # noqa: E402

__all__ = ["synthesise", "netlist_key", "design_rows", "docs_table", "replace_between", "write_area_doc",
           "doc_reports", "clock_gate", "longest_path", "NAND2_UM2_45NM", "LIBERTY", "ICG_MIN_BITS"]

LIBERTY = ROOT / "scripts" / "synth" / "generic_gates.lib"
NAND2_UM2_45NM = 0.798
REPORTS = ROOT / "sim_build" / "reports"
ICG_MIN_BITS = 8        # break-even is 3 bits (ICG 5.0 GE vs MUX2 2.33 GE per bit); flows use 3..8


def find_yosys():
    """Debian's yosys (0.23 runs synth/abc/stat reliably; the PyPI build stalled in abc), installed
    when missing and running as root (tb.common.toolchain.system_tool)."""
    from tb.common.toolchain import system_tool

    yosys = system_tool("yosys", "make synth")
    if yosys:
        return yosys
    sys.exit("yosys not found: install it with `sudo apt-get install yosys` (Debian/Ubuntu)")


def _generic_script(verilog, top, netlist):
    """Read and synthesise to Yosys's internal gates; save that netlist as JSON."""
    return "\n".join([
        f"read_verilog -sv {verilog}",
        f"synth -flatten -top {top}",
        f"write_json {netlist}",
    ])


def _map_script(netlist, tag):
    """Map a generic JSON netlist onto the liberty; ``{ltp_<tag>}``/``{stat_<tag>}`` outputs."""
    lib = str(LIBERTY)
    return "\n".join([
        "design -reset",
        f"read_liberty -lib {lib}",  # cell port directions (ltp) and the ICG cell
        f"read_json {netlist}",
        # enables and synchronous resets left become logic in front of a plain D flip-flop
        "dfflegalize -cell $_DFF_P_ 01",
        f"abc -liberty {lib}",
        "opt_clean -purge",
        f"tee -o {{ltp_{tag}}} ltp -noff",
        f"dfflibmap -liberty {lib}",
        "opt_clean -purge",
        f"tee -o {{stat_{tag}}} stat -liberty " + lib,
    ])


def _script(verilog, top):
    """The whole flow's text (also the cache key's recipe part)."""
    return "\n".join([_generic_script(verilog, top, "{generic}"), "# clock_gate() here",
                       _map_script("{generic}", "muxes"), _map_script("{gated}", "gated"),
                       f"# ICG_MIN_BITS={ICG_MIN_BITS}", "# report: longest path ends"])


def clock_gate(netlist, min_bits=ICG_MIN_BITS):
    """Rewrite a Yosys JSON netlist (dict, in place): every group of at least *min_bits*
    ``$_DFFE_PP_``/``$_DFFE_PN_`` cells sharing clock and enable becomes ``$_DFF_P_`` cells
    clocked by one ``ICG`` cell (an inverter in front of its enable for ``PN``). Returns the
    number of ICG cells and of flip-flops behind them."""
    (module,) = netlist["modules"].values()
    cells = module["cells"]
    groups = defaultdict(list)
    for name, cell in cells.items():
        if cell["type"] in ("$_DFFE_PP_", "$_DFFE_PN_"):
            conn = cell["connections"]
            groups[(cell["type"], str(conn["C"]), str(conn["E"]))].append(name)
    next_bit = 1 + max((b for net in module["netnames"].values() for b in net["bits"]
                        if isinstance(b, int)), default=1)
    icgs = gated = 0
    for (kind, _, _), names in sorted(groups.items()):
        if len(names) < min_bits:
            continue
        first = cells[names[0]]["connections"]
        enable = first["E"]
        if kind == "$_DFFE_PN_":
            cells[f"icg{icgs}_inv"] = {"hide_name": 1, "type": "$_NOT_", "parameters": {},
                                       "attributes": {}, "port_directions": {"A": "input", "Y": "output"},
                                       "connections": {"A": enable, "Y": [next_bit]}}
            enable, next_bit = [next_bit], next_bit + 1
        gck = [next_bit]
        next_bit += 1
        cells[f"icg{icgs}"] = {"hide_name": 1, "type": "ICG", "parameters": {}, "attributes": {},
                               "port_directions": {"CK": "input", "E": "input", "GCK": "output"},
                               "connections": {"CK": first["C"], "E": enable, "GCK": gck}}
        for name in names:
            conn = cells[name]["connections"]
            cells[name] = {"hide_name": 1, "type": "$_DFF_P_", "parameters": {}, "attributes": {},
                           "port_directions": {"C": "input", "D": "input", "Q": "output"},
                           "connections": {"C": gck, "D": conn["D"], "Q": conn["Q"]}}
        icgs, gated = icgs + 1, gated + len(names)
    return icgs, gated


def synthesise(name, params=None, force=False):
    """Synthesise design *name* (built with *params*); return its report dict, cached per
    Verilog text under ``sim_build/reports/area/<name><param suffix>.json``."""
    params = dict(params or {})
    label = name + param_suffix(params)
    verilog = generate(name, params)
    digest = _digest(verilog)
    cache = REPORTS / "area" / f"{label}.json"
    if cache.exists() and not force:
        report = json.loads(cache.read_text())
        if report.get("hash") == digest:
            return report
    yosys = find_yosys()
    work = ROOT / "sim_build" / "synth" / label
    work.mkdir(parents=True, exist_ok=True)
    files = {k: work / f"{k}.txt" for k in ("ltp_muxes", "stat_muxes", "ltp_gated", "stat_gated")}
    generic, gated_json = work / "generic.json", work / "gated.json"
    print(f"[synth] {label}: yosys running (log: {work / 'yosys.log'}) …", file=sys.stderr, flush=True)
    start = time.monotonic()

    def run(script, step):
        for key, path in files.items():
            script = script.replace("{" + key + "}", str(path))
        (work / f"{step}.ys").write_text(script + "\n")
        with open(work / "yosys.log", "a") as log:
            subprocess.run([yosys, "-q", "-s", str(work / f"{step}.ys")], check=True,
                           stdout=log, stderr=subprocess.STDOUT)

    (work / "yosys.log").write_text("")
    run(_generic_script(verilog, name, generic), "generic")
    netlist = json.loads(generic.read_text())
    icgs, gated = clock_gate(netlist)
    gated_json.write_text(json.dumps(netlist))
    run(_map_script(generic, "muxes") + "\n" + _map_script(gated_json, "gated"), "map")
    seconds = time.monotonic() - start
    cells, area = _parse_stat(files["stat_gated"].read_text())
    cells_mux, area_mux = _parse_stat(files["stat_muxes"].read_text())
    levels, path_from, path_to = longest_path(files["ltp_gated"].read_text())
    report = {
        "design": label, "hash": digest,
        "cells": {k: v for k, v in sorted(cells.items()) if k.isupper()},
        "flip_flops": cells.get("DFF", 0),
        "clock_gates": icgs, "gated_flip_flops": gated,
        "area_ge": round(area, 1),
        "area_um2_45nm": round(area * NAND2_UM2_45NM, 1),
        "area_ge_enable_muxes": round(area_mux, 1),
        "longest_path_levels": levels,
        "longest_path_from": path_from,
        "longest_path_to": path_to,
        "synth_seconds": round(seconds, 1),
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(report, indent=1))
    return report


def longest_path(ltp_text):
    """``(levels, start, end)`` of the path Yosys's ``ltp`` printed: *start* is the register
    output or input port it leaves, *end* the register it enters (``ff:`` line) or the output
    port / net it ends on."""
    levels = int(re.search(r"length=(\d+)", ltp_text).group(1))
    nodes = re.findall(r"^\s*(\d+|ff):\s+(\S+(?: \[\d+\])?)", ltp_text, re.M)
    names = [name.lstrip("\\") for _, name in nodes]
    return levels, (names[0] if names else ""), (names[-1] if names else "")


def _parse_stat(text):
    cells = {}
    for name, count in re.findall(r"^\s+(\w+)\s+(\d+)\s*$", text, re.M):
        cells[name] = int(count)
    area = float(re.search(r"Chip area for (?:top )?module.*?:\s*([\d.]+)", text).group(1))
    return cells, area


def table(reports):
    head = ("design", "cells", "flip-flops", "kGE", "µm² @45nm", "kGE without clock gating",
            "levels", "longest path")
    rows = [(r["design"], sum(r["cells"].values()), r["flip_flops"], f"{r['area_ge'] / 1000:.1f}",
             f"{r['area_um2_45nm']:.0f}", f"{r.get('area_ge_enable_muxes', r['area_ge']) / 1000:.1f}",
             r["longest_path_levels"],
             f"`{r.get('longest_path_from', '?')}` → `{r.get('longest_path_to', '?')}`")
            for r in reports]
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return md


AREA_DOC = ROOT / "docs" / "area.md"
DOC_BEGIN = "<!-- BEGIN generated by make synth (scripts/synth.py); do not edit -->"
DOC_END = "<!-- END generated by make synth -->"


def _digest(verilog):
    """The cache key: netlist, cell library and flow, not where the clone lives (the flow's
    text names the liberty by its absolute path)."""
    recipe = _script("", "").replace(str(ROOT), "<clone>")
    return hashlib.sha256(netlist_key(verilog) + LIBERTY.read_bytes() + recipe.encode()).hexdigest()[:16]


def design_rows(names, doc=None):
    """``(design, report or None, fresh)`` for each design: its cached report, and whether
    that report is of the design's current netlist (False: synthesised before a change).

    Without a cached report (a fresh clone: ``sim_build/`` is never committed) the design's
    row in *doc* (docs/area.md's text) stands in for it: the row names the netlist digest it
    was measured on, so it stays "current" exactly as long as the design's netlist does."""
    documented = doc_reports(doc) if doc is not None else {}
    rows = []
    for name in names:
        cache = REPORTS / "area" / f"{name}.json"
        report = json.loads(cache.read_text()) if cache.exists() else documented.get(name)
        fresh = report is not None and report.get("hash") == _digest(generate(name, {}))
        rows.append((name, report, fresh))
    return rows


_STALE = "stale: from before a later change of the design"


def docs_table(rows):
    """The Markdown table of every design for docs/area.md, from :func:`design_rows`."""
    md = ["| design | kGE clock-gated | kGE without clock gating | µm² at 45 nm | flip-flops "
          "| levels | longest path | netlist | report |",
          "|---|---|---|---|---|---|---|---|---|"]
    for name, r, fresh in rows:
        if r is None:
            md.append(f"| `{name}` | — | — | — | — | — | — | — | not synthesised |")
            continue
        md.append(f"| `{name}` | {r['area_ge'] / 1000:,.1f} | "
                  f"{r.get('area_ge_enable_muxes', r['area_ge']) / 1000:,.1f} | "
                  f"{r['area_um2_45nm']:,.0f} | {r['flip_flops']:,} | {r['longest_path_levels']} | "
                  f"`{r.get('longest_path_from', '?')}` → `{r.get('longest_path_to', '?')}` | "
                  f"`{r.get('hash', '?')}` | {'current' if fresh else _STALE} |")
    return md


_ROW = re.compile(r"^\| `(?P<design>\w+)` \| (?P<kge>[\d,.]+) \| (?P<kge_mux>[\d,.]+) \| "
                  r"(?P<um2>[\d,]+) \| (?P<ff>[\d,]+) \| (?P<levels>\d+) \| "
                  r"`(?P<start>[^`]*)` → `(?P<end>[^`]*)` \| `(?P<hash>[0-9a-f?]+)` \| (?P<state>[^|]*?) \|", re.M)


def doc_reports(text):
    """The reports the table in docs/area.md (*text*) records, by design: the figures it
    shows and the netlist digest they were measured on (see :func:`docs_table`)."""
    def number(v):
        return float(v.replace(",", ""))
    return {row["design"]: {
        "design": row["design"], "hash": row["hash"],
        "area_ge": number(row["kge"]) * 1000, "area_ge_enable_muxes": number(row["kge_mux"]) * 1000,
        "area_um2_45nm": number(row["um2"]), "flip_flops": int(number(row["ff"])),
        "longest_path_levels": int(row["levels"]),
        "longest_path_from": row["start"], "longest_path_to": row["end"],
        "state": row["state"], "source": "docs/area.md"} for row in _ROW.finditer(text)}


def replace_between(text, body, begin=DOC_BEGIN, end=DOC_END):
    """*text* with the lines between the *begin* and *end* marker lines replaced by *body*
    (a list of lines); ValueError if a marker is missing."""
    lines = text.split("\n")
    try:
        i, j = lines.index(begin), lines.index(end)
    except ValueError:
        raise ValueError(f"markers {begin!r} / {end!r} not found") from None
    return "\n".join(lines[:i + 1] + body + lines[j:])


def write_area_doc(names, doc=AREA_DOC):
    """Rewrite the all-designs table of docs/area.md from the cached reports."""
    text = doc.read_text()
    new = replace_between(text, docs_table(design_rows(names, text)))
    if new != text:
        doc.write_text(new)
    return new != text


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("block", nargs="?", help="a design (aes256, …) or block folder (aes, …); default all")
    parser.add_argument("--force", action="store_true", help="ignore the cache")
    args = parser.parse_args()
    names = by_folder(args.block) if args.block else available()
    reports = [synthesise(n, force=args.force) for n in names]
    for r in reports:
        print(f"\n{r['design']}: cells by type")
        for cell, count in r["cells"].items():
            print(f"  {cell:<6} {count:>8}")
    print()
    md = table(reports)
    print("\n".join(md))
    REPORTS.mkdir(parents=True, exist_ok=True)
    # merge with earlier reports of other designs so area.json covers every design synthesised
    merged = {}
    old = REPORTS / "area.json"
    if old.exists():
        merged = {r["design"]: r for r in json.loads(old.read_text())}
    merged.update({r["design"]: r for r in reports})
    (REPORTS / "area.json").write_text(json.dumps(list(merged.values()), indent=1))
    (REPORTS / "area.md").write_text("\n".join(table(list(merged.values()))) + "\n")
    print(f"\nwritten: {(REPORTS / 'area.json').relative_to(ROOT)}, {(REPORTS / 'area.md').relative_to(ROOT)}")
    if write_area_doc(available()):
        print(f"updated: {AREA_DOC.relative_to(ROOT)} (the table of every design)")
    from scripts.bench import write_line_rate_doc
    if write_line_rate_doc():
        print("updated: docs/line-rate.md (its table)")


if __name__ == "__main__":
    main()
