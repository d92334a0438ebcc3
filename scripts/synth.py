"""Yosys synthesis area report (``make synth [BLOCK=<design or folder>]``).

Each design is converted to Verilog, synthesised flat with Debian's Yosys onto
``scripts/synth/generic_gates.lib`` and reported as: cells by type, flip-flops, area in
NAND2-equivalent gates (GE), the same area in µm² at 45 nm (NanGate45 NAND2_X1 = 0.798 µm²)
and the longest combinational path in gate levels (Yosys ``ltp``). Results are cached per
Verilog text in ``sim_build/reports/area/<design>.json``; the table goes to the screen and to
``sim_build/reports/area.{json,md}``.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hw.designs import available, by_folder  # noqa: E402
from scripts.verilog import generate, verilog_body  # noqa: E402

__all__ = ["synthesise", "NAND2_UM2_45NM", "LIBERTY"]

LIBERTY = ROOT / "scripts" / "synth" / "generic_gates.lib"
NAND2_UM2_45NM = 0.798
REPORTS = ROOT / "sim_build" / "reports"


def find_yosys():
    """Debian's yosys (0.23 runs synth/abc/stat reliably; the PyPI build stalled in abc)."""
    yosys = shutil.which("yosys")
    if yosys:
        return yosys
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("yosys not found: installing the Debian package `yosys` …", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "yosys"], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        return shutil.which("yosys")
    sys.exit("yosys not found: install it with `sudo apt-get install yosys` (Debian/Ubuntu)")


def _script(verilog, top):
    lib = str(LIBERTY)
    return "\n".join([
        f"read_liberty -lib {lib}",  # cell port directions, for ltp
        f"read_verilog -sv {verilog}",
        f"synth -flatten -top {top}",
        # enables and synchronous resets become logic in front of a plain D flip-flop
        "dfflegalize -cell $_DFF_P_ 01",
        f"abc -liberty {lib}",
        "opt_clean -purge",
        "tee -o {ltp} ltp -noff",
        f"dfflibmap -liberty {lib}",
        "opt_clean -purge",
        "tee -o {stat} stat -liberty " + lib,
    ])


def _parse_stat(text):
    cells = {}
    for name, count in re.findall(r"^\s+(\w+)\s+(\d+)\s*$", text, re.M):
        cells[name] = int(count)
    area = float(re.search(r"Chip area for (?:top )?module.*?:\s*([\d.]+)", text).group(1))
    return cells, area


def synthesise(name, force=False):
    """Synthesise design *name*; return its report dict (cached per Verilog text)."""
    verilog = generate(name)
    digest = hashlib.sha256(verilog_body(verilog) + LIBERTY.read_bytes() +
                            _script("", "").encode()).hexdigest()[:16]
    cache = REPORTS / "area" / f"{name}.json"
    if cache.exists() and not force:
        report = json.loads(cache.read_text())
        if report.get("hash") == digest:
            return report
    yosys = find_yosys()
    work = ROOT / "sim_build" / "synth" / name
    work.mkdir(parents=True, exist_ok=True)
    ltp_file, stat_file = work / "ltp.txt", work / "stat.txt"
    script = _script(verilog, name).replace("{ltp}", str(ltp_file)).replace("{stat}", str(stat_file))
    (work / "synth.ys").write_text(script + "\n")
    print(f"[synth] {name}: yosys running (log: {work / 'yosys.log'}) …", file=sys.stderr, flush=True)
    start = time.monotonic()
    with open(work / "yosys.log", "w") as log:
        subprocess.run([yosys, "-q", "-s", str(work / "synth.ys")], check=True, stdout=log,
                       stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    cells, area = _parse_stat(stat_file.read_text())
    levels = int(re.search(r"length=(\d+)", ltp_file.read_text()).group(1))
    report = {
        "design": name, "hash": digest,
        "cells": {k: v for k, v in sorted(cells.items()) if k.isupper()},
        "flip_flops": cells.get("DFF", 0),
        "area_ge": round(area, 1),
        "area_um2_45nm": round(area * NAND2_UM2_45NM, 1),
        "longest_path_levels": levels,
        "synth_seconds": round(seconds, 1),
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(report, indent=1))
    return report


def table(reports):
    head = ("design", "cells", "flip-flops", "area kGE", "µm² @45nm", "levels")
    rows = [(r["design"], sum(r["cells"].values()), r["flip_flops"], f"{r['area_ge'] / 1000:.1f}",
             f"{r['area_um2_45nm']:.0f}", r["longest_path_levels"]) for r in reports]
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return md


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("block", nargs="?", help="a design (aes256, …) or block folder (aes, …); default all")
    parser.add_argument("--force", action="store_true", help="ignore the cache")
    args = parser.parse_args()
    names = by_folder(args.block) if args.block else available()
    reports = [synthesise(n, args.force) for n in names]
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


if __name__ == "__main__":
    main()
