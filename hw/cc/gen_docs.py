"""Print (or with ``--write`` update in docs/cc.md) the generated allow-list and register
tables of ``cc_ctrl``; sw/cc/test_docs.py checks that the committed doc equals them."""
import sys

from .regs import DOC, DOC_BEGIN, DOC_END, doc_tables


def main():
    text = doc_tables()
    if "--write" in sys.argv[1:]:
        doc = DOC.read_text()
        start, end = doc.index(DOC_BEGIN), doc.index(DOC_END) + len(DOC_END)
        DOC.write_text(doc[:start] + text + doc[end:])
        print(f"updated {DOC}")
    else:
        print(text)


if __name__ == "__main__":
    main()
