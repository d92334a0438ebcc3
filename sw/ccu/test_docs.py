"""The example in docs/ccu.md runs as written."""
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "ccu.md"


def test_docs_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1 and 10 <= len(blocks[0].strip().splitlines()) <= 20
    exec(compile(blocks[0], str(DOC), "exec"), {})
