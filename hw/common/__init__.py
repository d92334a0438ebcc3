"""Helpers shared by the blocks: named nets and parameter checks (:mod:`.util`), log-depth
arithmetic that synthesis keeps log-depth (:mod:`.arith`), and stream stages (:mod:`.stream`)."""
from .arith import add, at_least, at_most, decrement, increment, prefix_and, prefix_carries
from .stream import SkidBuffer
from .util import check_choice, check_int, lowest_set, wire

__all__ = ["wire", "check_int", "check_choice", "lowest_set", "prefix_and", "prefix_carries",
           "increment", "decrement", "add", "at_least", "at_most", "SkidBuffer"]
