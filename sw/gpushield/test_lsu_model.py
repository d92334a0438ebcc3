"""Tests of the load/store-path cycle model (sw/gpushield/lsu_model.py): its invariants
and a tiny trace whose cycles are worked out by hand (in the test's docstring)."""
import random

import pytest

from sw.gpushield.driver import Driver
from sw.gpushield.lsu_model import BcuTiming, LsuConfig, LsuOp, annotate, figures, overhead_pct, simulate, trace_ops
from sw.gpushield.model import Result, Uop
from sw.gpushield.timing import answer_cycles
from sw.gpushield.traces import KERNELS, WarpOp, kernel


class _InstantEngine:
    """A BCU that answers in the cycle it is given the addresses (no RTL can: the timing
    rules need at least the engine's and checker's cycles)."""

    def engine(self):
        return self

    def present_uops(self, cycle, uops, slot=0):
        return cycle


ZERO = _InstantEngine()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_zero_latency_bcu_costs_nothing(name):
    """A BCU that answers in no time never delays an instruction: overhead 0."""
    for analysis in (False, True):
        ops, _, _ = trace_ops(name, analysis, seed=3)
        base, zero = simulate(ops), simulate(ops, bcu=ZERO)
        assert zero.cycles == base.cycles and zero.complete == base.complete, (
            f"{name} (analysis {analysis}): {zero.cycles} cycles with a zero-latency BCU, {base.cycles} without")
        assert zero.squashed == [], f"{name}: in-bounds trace squashed {zero.squashed[:5]}"


def test_overhead_grows_with_bcu_latency():
    """Overhead is never negative and never falls as the BCU's front gets deeper; once
    the check takes longer than the L1D path it is positive, and with one instruction in
    flight (latency-bound) every extra cycle of depth shows."""
    ops, _, _ = trace_ops("matmul", False, seed=3)
    base = simulate(ops)
    prev = None
    for depth in range(0, 400, 25):
        run = simulate(ops, bcu=BcuTiming(front_registers=depth))
        assert run.cycles >= base.cycles, f"depth {depth}: the BCU made the trace faster"
        assert prev is None or run.cycles >= prev, f"depth {depth}: {run.cycles} cycles < {prev} at depth - 25"
        prev = run.cycles
    cfg = LsuConfig(in_flight=1, l1d_miss=28, tlb_miss=0)      # L1D path: 1 + 28 cycles (+ port)
    base = simulate(ops, cfg)
    last = 0.0
    for depth in (40, 60, 80, 120):
        pct = overhead_pct(simulate(ops, cfg, BcuTiming(front_registers=depth)), base)
        assert pct > last, f"depth {depth}: overhead {pct:.2f} % not above {last:.2f} % (latency-bound)"
        last = pct


def test_violation_squashes_exactly_that_warp():
    """One store overflows its buffer by one element (lane 31): the golden model flags
    that op alone, and the LSU squashes it alone — its store is not performed, every
    other store is. Without the BCU nothing is squashed and the bad store goes through."""
    drv = Driver(random.Random(5))
    k = kernel("streaming", drv, seed=5, n=1024)
    ops = list(k.ops())
    bad = 29
    assert ops[bad].store
    size = drv.buffers[ops[bad].base].size
    lanes = list(ops[bad].lanes)
    lanes[31] = (ops[bad].base, size)            # the element just past the end
    ops[bad] = WarpOp(ops[bad].base, lanes, ops[bad].size_log2, True, False, ops[bad].access)
    launch = drv.launch()
    lsu_ops, _ = annotate(ops, launch, drv)
    assert [i for i, o in enumerate(lsu_ops) if not o.ok] == [bad], "the model should flag only the bad store"
    stores = [i for i, o in enumerate(ops) if o.store]
    run = simulate(lsu_ops, bcu=BcuTiming())
    assert run.squashed == [bad], f"squashed {run.squashed}, expected [{bad}]"
    assert run.performed_stores == [i for i in stores if i != bad], "a store other than the bad one was dropped"
    plain = simulate(lsu_ops)
    assert plain.squashed == [] and bad in plain.performed_stores, "without the BCU nothing is squashed"


def test_hand_computed_trace():
    """agu 1, TLB 1 (+10 on a miss, one 4 KiB page entry), L1D 4 / 20 cycles, 128-byte
    lines, 2 instructions in flight; BCU front of 3 registers, RBT fetch turnaround 40 (the
    engine's rules, docs/gpushield.md: E from presented + 4; L1 1 cycle, L2 2, miss 1 with
    its mem_req 2 cycles later; the answer 3 cycles after the micro-op leaves the engine).

    op0 load line 0 (RCache miss, id 5), op1 load line 1 (L1 hit, id 6), op2 load line 0
    (L1 hit, id 5), op3 store lines 2 and 3 (L2 hit, id 7, a violation). Without the BCU:
      op0 issue 0, addr 1, TLB miss -> 12, port 12, L1D miss -> 32
      op1 issue 1, addr 2, TLB -> 3, port 13 (behind op0), miss -> 33
      op2 waits for a slot: issue 32, addr 33, TLB -> 34, port 34, hit -> 38
      op3 slot at 33: issue 33, addr 34, TLB -> 35, port 35 and 36, store ack -> 39, 40
      = 40 cycles.
    With the BCU (presented at addr):
      op0 presented 1: E 5, mem_req 7, mem_resp 47, leaves the queue 48, answer 51 -> completes 51
      op1 presented 2: E 6 (not held by the miss), queued behind it: leaves 49, answer 52 -> 52
      op2 slot at 51: issue 51, addr 52, TLB 53, port 53, hit 57; E 56 (its fill came at 47),
          queue empty: answer 59 -> 59
      op3 slot at 52: issue 52, addr 53, TLB 54, port 54, 55 -> 58, 59; E 57-58, answer 61 -> 61, squashed
      = 61 cycles: overhead 61 / 40 - 1 = 52.5 %."""
    cfg = LsuConfig(agu=1, tlb_hit=1, tlb_miss=10, tlb_entries=1, page_bytes=4096, l1d_hit=4, l1d_miss=20,
                    l1d_bytes=1024, l1d_ways=2, line_bytes=128, in_flight=2)
    bcu = BcuTiming(front_registers=3, rbt_fetch=40)
    ops = [LsuOp([4 * k for k in range(32)], levels=["mem"], eids=[5]),
           LsuOp([128 + 4 * k for k in range(32)], levels=["L1"], eids=[6]),
           LsuOp([4 * k for k in range(32)], levels=["L1"], eids=[5]),
           LsuOp([256, 320, 384, 448], store=True, levels=["L2"], ok=False, eids=[7])]
    plain = simulate(ops, cfg)
    assert (plain.issue, plain.complete, plain.cycles) == ([0, 1, 32, 33], [32, 33, 38, 40], 40)
    assert (plain.l1d_hits, plain.l1d_lines, plain.tlb_misses) == (1, 5, 1)
    checked = simulate(ops, cfg, bcu)
    assert (checked.issue, checked.complete, checked.cycles) == ([0, 1, 51, 52], [51, 52, 59, 61], 61)
    assert checked.squashed == [3] and checked.performed_stores == []
    assert overhead_pct(checked, plain) == pytest.approx(52.5)
    # ops 0 and 1 as an untimed warmup (TLB page 0 and lines 0, 1 cached), then drained:
    # op2 issue 0, addr 1, TLB hit 2, port 2, hit 6; op3 issue 1, addr 2, TLB 3, port 3, 4 -> 7, 8
    warm = simulate(ops[2:], cfg, warmup=ops[:2])
    assert (warm.issue, warm.complete, warm.l1d_hits, warm.tlb_misses) == ([0, 1], [6, 8], 1, 0)


def test_type1_bypasses_the_bcu():
    """Type 1 instructions never reach the BCU (unless the bypass is off)."""
    ops, _, _ = trace_ops("gather_scatter", True, seed=3)
    n_checked = sum(o.checked for o in ops)
    assert 0 < n_checked < len(ops)
    assert simulate(ops, bcu=BcuTiming()).bcu_requests == n_checked
    assert simulate(ops, LsuConfig(type1_bypass=False), BcuTiming()).bcu_requests == len(ops)


def test_bad_parameters_raise():
    for make in (lambda: LsuConfig(in_flight=0), lambda: LsuConfig(l1d_hit=-1), lambda: LsuConfig(line_bytes=100),
                 lambda: LsuConfig(l1d_bytes=128, l1d_ways=4), lambda: LsuConfig(agu=1.5),
                 lambda: BcuTiming(front_registers=-1), lambda: BcuTiming(queue_depth=0),
                 lambda: BcuTiming(max_fetches=0), lambda: BcuTiming(rbt_fetch=-1),
                 lambda: simulate([LsuOp([0], levels=["L3"])], bcu=BcuTiming()),
                 lambda: simulate([LsuOp([0], levels=["L1", "L2"], eids=[1])], bcu=BcuTiming())):
        with pytest.raises(ValueError):
            make()


def test_bcu_answers_follow_the_engine_timing():
    """With no limit on instructions in flight, every instruction issues when it would
    without the BCU, is presented to the BCU when its addresses are ready (issue + agu),
    and completes at the later of its access (the run without the BCU) and the answer
    that sw/gpushield/timing.py gives the checked ones presented up front; and the cold
    RBT fetches do delay some instruction."""
    cfg = LsuConfig(in_flight=1 << 20)
    bcu = BcuTiming()
    for name in ("mixed_ids", "gather_scatter"):
        ops, _, _ = trace_ops(name, False, seed=3)
        base, run = simulate(ops, cfg), simulate(ops, cfg, bcu)
        assert run.issue == base.issue, f"{name}: the BCU changed issue cycles with unlimited instructions in flight"
        checked = [i for i, o in enumerate(ops) if o.checked]
        requests = [(base.issue[i] + cfg.agu, Result(0, True, None, uops=[Uop(lanes=[], eid=e, level=lv) for lv, e
                                                                          in zip(ops[i].levels, ops[i].eids)]))
                    for i in checked]
        answers = dict(zip(checked, answer_cycles(requests, bcu.rbt_fetch, bcu.front_registers)))
        want = [max(done, answers.get(i, done)) for i, done in enumerate(base.complete)]
        assert run.complete == want, f"{name}: completions differ from max(access, engine answer) " \
            f"at instruction {next(i for i, (a, b) in enumerate(zip(run.complete, want)) if a != b)}"
        assert any(answers[i] > base.complete[i] for i in checked), f"{name}: no answer after its access"


def test_figures_cover_every_trace():
    """figures(): every kernel, overheads never negative (a check can only delay), a
    Type 1 share in [0, 1], and the lookups saved equal to the checked lookups minus
    those left with Type 1 counted from the ops."""
    figs = figures(params={}, seed=3)
    for key in ("lsu_overhead_pct", "lsu_overhead_pct_all_checked", "type1_share", "type1_lookups_saved"):
        assert set(figs[key]) == set(KERNELS), f"{key}: {sorted(figs[key])}"
    for name, r in figs["traces"].items():
        for key in ("overhead_pct", "overhead_pct_all_checked", "overhead_pct_warm", "overhead_pct_all_checked_warm"):
            assert r[key] >= 0, f"{name}: negative {key} {r[key]}"
        assert 0 <= r["type1_share"] <= 1
        checked, _, _ = trace_ops(name, False, seed=3)
        typed, _, _ = trace_ops(name, True, seed=3)
        count = lambda ops: sum(len([lv for lv in o.levels if lv in ("L1", "L2", "mem")])  # noqa: E731
                                for o in ops if o.checked)
        assert r["type1_lookups_saved"] == count(checked) - count(typed), name
