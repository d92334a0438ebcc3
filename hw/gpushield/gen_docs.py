"""Print (or with ``--write`` update in docs/gpushield.md) the generated ``bcu_csr``
register table; also writes its JSON form to ``sim_build/reports/bcu_csr_regs.json``."""
import sys

from .csr import DOC, DOC_BEGIN, DOC_END, doc_table, register_map


def main():
    text = doc_table()
    if "--write" in sys.argv[1:]:
        doc = DOC.read_text()
        start, end = doc.index(DOC_BEGIN), doc.index(DOC_END) + len(DOC_END)
        DOC.write_text(doc[:start] + text + doc[end:])
        out = DOC.parents[1] / "sim_build" / "reports" / "bcu_csr_regs.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(register_map().to_json())
        print(f"updated {DOC} and {out}")
    else:
        print(text)


if __name__ == "__main__":
    main()
