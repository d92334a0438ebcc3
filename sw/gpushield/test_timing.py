"""The engine timing rules of sw/gpushield/timing.py on hand-worked streams (docs/gpushield.md,
"Micro-architecture and timing"). Front of 3 registers, checker of 3: a request presented
in cycle p has its first micro-op in E in cycle p + 4, and a micro-op leaving E for the
checker in cycle t is answered in cycle t + 3."""
import pytest

from hw.gpushield.engine import MAX_FETCHES, QUEUE_DEPTH
from sw.gpushield.model import LATENCY, Result, Uop
from sw.gpushield.timing import answer_cycles, lone_latency

F = 3       # front registers (32 lanes)


def req(*levels, eids=None):
    eids = eids or list(range(100, 100 + len(levels)))
    return Result(0, True, None, uops=[Uop(lanes=[0], eid=e, level=lv) for lv, e in zip(levels, eids)])


def test_lone_requests():
    # L1: E at 4, checker 5..7; L2: E 4-5; miss: E 4, mem_req 6, answer 6 + T, queue head 7 + T
    assert lone_latency(req("L1"), 10, F) == 7
    assert lone_latency(req("direct"), 10, F) == 7
    assert lone_latency(req("L2"), 10, F) == 8
    assert lone_latency(req("mem"), 10, F) == 20
    for level in ("direct", "L1", "L2"):
        assert req(level).latency(10) == LATENCY[level]
    assert req("mem").latency(10) == LATENCY["mem"] + 10
    # a warp of three groups: L1 (E 4), miss (E 5, answer 17, out 18), L2 (E 6-7, queued, out 19)
    assert lone_latency(req("L1", "mem", "L2"), 10, F) == 22


def test_back_to_back_hits():
    stream = [(p, req(lv)) for p, lv in enumerate(["L1"] * 4 + ["L2"] * 3 + ["L1"])]
    # presented one per cycle: L1 hits leave E at 4..7, L2 hits at 9, 11, 13, the L1 hit at 14
    assert answer_cycles(stream, 10, F) == [7, 8, 9, 10, 12, 14, 16, 17]


def test_hits_behind_a_miss_wait_only_for_its_answer():
    stream = [(0, req("mem"))] + [(p, req("L1", eids=[200 + p])) for p in range(1, 6)]
    # the miss leaves E at 4 (answer 16, out 17); the hits leave E at 5..9 into the queue
    # and follow it out at 18..22
    assert answer_cycles(stream, 10, F) == [20, 21, 22, 23, 24, 25]


def test_misses_overlap_up_to_max_fetches():
    n = MAX_FETCHES + 1
    stream = [(p, req("mem", eids=[p])) for p in range(n)]
    got = answer_cycles(stream, 100, F)
    # the first MAX_FETCHES leave E at 4, 5, ...: answers 106 + k, out 107 + k, resp 110 + k
    assert got[:MAX_FETCHES] == [110 + k for k in range(MAX_FETCHES)]
    # the next waits for a free fetch: the first answer (cycle 106) frees it in cycle 107
    assert got[MAX_FETCHES] == 107 + 2 + 100 + 1 + 3


def test_hit_on_a_pending_entry_waits_for_the_fill():
    stream = [(0, req("mem", eids=[7])), (1, req("L1", eids=[7])), (2, req("L2", eids=[7]))]
    # miss: E 4, answer 16, out 17. The L1 hit waits until 17 (filled), queued behind the
    # miss (popped in 17): out 18. The L2 hit of the same id waits as well: E from 18, word 19
    assert answer_cycles(stream, 10, F) == [20, 21, 22]
    # another slot's entry with the same encrypted id does not wait
    stream = [(0, req("mem", eids=[7]), 0), (1, req("L1", eids=[7]), 1)]
    assert answer_cycles(stream, 10, F) == [20, 21]


def test_full_queue_stalls_e():
    hits = QUEUE_DEPTH + 2
    stream = [(0, req("mem"))] + [(p, req("L1", eids=[300 + p])) for p in range(1, hits + 1)]
    got = answer_cycles(stream, 100, F)
    # the miss: E 4, answer 106, out 107. Hits leave E at 5, 6, ... into the queue until it
    # holds QUEUE_DEPTH (the miss and QUEUE_DEPTH - 1 hits, the last pushed in 4 + Q - 1);
    # the next waits until the miss has left (cycle 108), the one after it until 109.
    assert got[0] == 110
    assert got[1:] == [110 + k for k in range(1, hits + 1)]
    free = answer_cycles(stream, 100, F, queue_depth=100)
    assert free == got      # the answers are bound by the miss anyway
    # ... but E is held: a miss after the hits (presented in cycle hits + 1) leaves E in
    # cycle hits + 5 with a deep queue, but only after the last hit (which left in cycle
    # 107 + hits - QUEUE_DEPTH + 1) with the real one
    after = stream + [(hits + 1, req("mem", eids=[999]))]
    deep, shallow = answer_cycles(after, 100, F, queue_depth=100), answer_cycles(after, 100, F)
    assert deep[-1] == hits + 5 + 2 + 100 + 1 + 3
    assert shallow[-1] == 107 + hits - QUEUE_DEPTH + 2 + 2 + 100 + 1 + 3


def test_turnaround_per_fetch_and_errors():
    stream = [(0, req("mem", eids=[1])), (0, req("mem", eids=[2]))]
    assert answer_cycles(stream, [10, 3], F) == [20, 21]     # answers in order: the second waits
    assert answer_cycles(stream, lambda k: 10, F) == [20, 21]
    with pytest.raises(ValueError):
        answer_cycles([(0, req("L3"))], 10, F)
    with pytest.raises(ValueError):
        answer_cycles(stream, 10, F, queue_depth=0)
