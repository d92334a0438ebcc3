"""Functional cover points of ``pcie_rdtable`` (sampled by :class:`tb.pcie.env.PcieTB`'s monitor).

- ``pcie_read``: every read the table completes (its last completion forwarded on ``cpl_o``
  with ``cc`` set): how the host split it (``packets``: 1, 2, 3 or more completion packets)
  × how its tag was allocated (``tag``: the first use of the tag since reset, a reuse, or a
  reuse in the cycle right after the tag was freed — the allocator's bypass case).
- ``pcie_bad``: every completion the table drops or repairs, by ``cause``
  (:class:`hw.pcie.layout.Cause`, all six).
"""
from hw.pcie.layout import Cause
from tb.common.cover import Covergroup

__all__ = ["READ", "BAD", "PcieCoverage"]

READ = Covergroup("pcie_read", {"packets": [1, 2, "3+"], "tag": ["first_use", "reused", "reused_next_cycle"]},
                  crosses={"packets_x_tag": ("packets", "tag")})
BAD = Covergroup("pcie_bad", {"cause": [c.name for c in Cause if c is not Cause.NONE]})


class PcieCoverage:
    """Per-tag state the samples need, kept beside the scoreboard."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.used = set()           # tags allocated since reset
        self.how = {}               # tag -> its allocation's "tag" bin
        self.packets = {}           # tag -> completion packets forwarded so far

    def allocated(self, tag, next_cycle_reuse):
        self.how[tag] = "reused_next_cycle" if next_cycle_reuse else "reused" if tag in self.used else "first_use"
        self.used.add(tag)
        self.packets[tag] = 0

    def forwarded(self, beat):
        """A beat checked on ``cpl_o``."""
        if not beat.first:
            return
        tag = beat.hdr["tag"]
        self.packets[tag] = self.packets.get(tag, 0) + 1
        if beat.hdr["cc"]:
            n = self.packets.pop(tag)
            READ.sample(packets=n if n < 3 else "3+", tag=self.how.pop(tag, "first_use"))

    @staticmethod
    def errors(new):
        for _, _, cause in new:
            BAD.sample(cause=cause.name)
