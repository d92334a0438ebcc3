"""Run every benchmark (``make bench``): each ``tb/<block>/bench_<block>.py`` has a
``bench()`` that returns ``{design: figures}``; synthesis figures (area, gate levels) are
added from ``scripts/synth.py`` (cached, so only a changed design is synthesised again).
Prints one table per design and writes ``sim_build/reports/bench.json``."""
import argparse
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hw.designs import DESIGNS  # noqa: E402

REPORTS = ROOT / "sim_build" / "reports"


def bench_modules(block=None):
    for path in sorted((ROOT / "tb").glob("*/bench_*.py")):
        folder = path.parent.name
        if block and block != folder and DESIGNS.get(block, None) and DESIGNS[block].folder != folder:
            continue
        if block and block not in DESIGNS and block != folder:
            continue
        yield f"tb.{folder}.{path.stem}"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("block", nargs="?", help="only this block folder or design")
    parser.add_argument("--no-synth", action="store_true", help="skip the area figures")
    args = parser.parse_args()
    results = {}
    for module in bench_modules(args.block):
        print(f"[bench] {module} …", file=sys.stderr, flush=True)
        results.update(importlib.import_module(module).bench())
    if not args.no_synth:
        from scripts.synth import synthesise

        for design in list(results):
            if design in DESIGNS:
                area = synthesise(design)
                results[design].update(area_kge=round(area["area_ge"] / 1000, 1),
                                       area_um2_45nm=area["area_um2_45nm"],
                                       flip_flops=area["flip_flops"],
                                       longest_path_levels=area["longest_path_levels"])
    for design, figures in results.items():
        print(f"\n{design}")
        width = max(map(len, figures))
        for name, value in figures.items():
            print(f"  {name:<{width}}  {value}")
    REPORTS.mkdir(parents=True, exist_ok=True)
    out = REPORTS / "bench.json"
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged.update(results)
    out.write_text(json.dumps(merged, indent=1))
    print(f"\nwritten: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
