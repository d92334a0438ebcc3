"""Which test folder ``make sim BLOCK=<block>`` runs.

``python -m scripts.blocks [BLOCK]`` prints the pytest paths: ``tb`` for the whole
regression; for a block folder (``aes``, ``sxp``, …) or a design (``aes256``, …) the block's
cocotb tests in ``tb/<folder>``, or for a software-only block (``ccu``) its tests in
``sw/<folder>``. A name that selects no test fails with a message instead of a pytest run
that collects nothing.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hw.designs import DESIGNS  # noqa: E402

__all__ = ["test_paths", "ROOT"]


def _has_tests(folder):
    return folder.is_dir() and any(folder.glob("test_*.py"))


def test_paths(block=None, root=ROOT):
    """The pytest paths (relative to *root*) of *block*'s regression; ValueError if there
    are none."""
    if not block:
        return ["tb"]
    folder = DESIGNS[block].folder if block in DESIGNS else block
    for side in ("tb", "sw"):
        if _has_tests(root / side / folder):
            return [f"{side}/{folder}"]
    known = sorted({d.folder for d in DESIGNS.values()} |
                   {p.name for side in ("tb", "sw") for p in (root / side).iterdir()
                    if _has_tests(p)})
    raise ValueError(f"no tests for BLOCK={block!r} (looked in tb/{folder} and sw/{folder}); "
                     f"blocks with tests: {', '.join(known)}; designs: {', '.join(DESIGNS)}")


test_paths.__test__ = False     # not a pytest test, despite its name


if __name__ == "__main__":
    try:
        print(" ".join(test_paths(sys.argv[1] if len(sys.argv) > 1 else None)))
    except ValueError as e:
        sys.exit(f"make sim: {e}")
