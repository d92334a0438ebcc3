"""``pcie_rdtable`` (hw/pcie): the error counters saturate.

Design: ``PcieReadTable()`` with the parameters of the ``pcie_rdtable`` design (256 entries).

Environment: every input free in every cycle, the reset too (``Harness(reset="free")``),
and the first cycle starts from any state of the table, so the counters start anywhere,
their ceiling 2³² − 1 included.

Property ``counters_saturate``: from one cycle to the next, ``err_count`` and
``timeout_count`` each hold or count up by one, unless the reset was high: at 2³² − 1
they hold. No simulation reaches that ceiling (2³² bad completions or timeouts), which is
why the ``Mux`` arm that holds it is the one uncovered line of the table's counters
(docs/coverage.md). Proved by 1-induction: the check is about one transition, from any
state.
"""
from hw.pcie import PcieReadTable

from . import Harness, Property, free_inputs, with_mutant

__all__ = ["PROPERTIES"]


def counters_saturate(mutant=None):
    h = Harness(reset="free")
    dut = PcieReadTable(_formal_mutant=mutant)
    h.m.submodules.dut = dut
    free_inputs(h.m, dut)
    for counter in ("err_count", "timeout_count"):
        h.counts_by_one(counter, getattr(dut, counter), h.rst)
    h.notes.append("PcieReadTable() (256 entries); reset and inputs free in every cycle, any initial state")
    return h


PROPERTIES = [
    *with_mutant(Property("pcie_rdtable", "counters_saturate", counters_saturate, depth=2, induction=1,
                          doc="err_count and timeout_count hold or count up by one unless reset: "
                              "they hold at 2^32 - 1"),
                 "counters_wrap", "the counters count on past 2^32 - 1 (to 0)"),
]
