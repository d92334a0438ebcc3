"""docs/registers.md is exactly what ``python -m scripts.gen_docs`` generates."""
import json

from hw.sxp.regs import DOC, Cause, doc_text, register_map


def test_registers_md_is_generated():
    assert DOC.read_text() == doc_text(), \
        "docs/registers.md differs from the code: run `python -m scripts.gen_docs`"


def test_json_describes_the_same_map():
    d = json.loads(register_map().to_json())
    assert {r["name"] for r in d["registers"]} == {r.name for r in register_map()}
    assert "KEY_W0" in DOC.read_text() and all(c.name in DOC.read_text() for c in Cause)
