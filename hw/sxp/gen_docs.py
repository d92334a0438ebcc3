"""Print (or with ``--write`` write) docs/registers.md, generated from
:func:`hw.sxp.regs.register_map`; ``--write`` also writes the JSON form next to it in
``sim_build/reports/sxp_regs.json``."""
import sys

from .regs import DOC, doc_text, register_map


def main():
    text = doc_text()
    if "--write" in sys.argv[1:]:
        DOC.write_text(text)
        out = DOC.parents[1] / "sim_build" / "reports" / "sxp_regs.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(register_map().to_json())
        print(f"updated {DOC} and {out}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
