"""docs/cc.md carries exactly the allow-list and register tables generated from the code
(regenerate with ``python -m scripts.gen_docs``)."""
from hw.cc.regs import DOC, DOC_BEGIN, DOC_END, doc_tables


def test_cc_doc_has_generated_tables():
    doc = DOC.read_text()
    start, end = doc.index(DOC_BEGIN), doc.index(DOC_END) + len(DOC_END)
    assert doc[start:end] == doc_tables(), "docs/cc.md is stale: run python -m scripts.gen_docs"
