"""Tests of the compiler's bounds analysis (sw/gpushield/analysis.py) and of the Type 1
marks the trace generators take from it.

Soundness is checked against the traces themselves: every lane of every op the analysis
made Type 1 must lie inside its buffer as the driver allocated it (and no Type 1 store
may hit a read-only buffer) — independently of the analysis's arithmetic. The expected
sets of proven instructions are written by hand from the kernels' code."""
import itertools
import os
import random

import pytest

from sw.gpushield.analysis import Access, Affine, BufferDesc, Guard, KernelDesc, Var, analyse, loop
from sw.gpushield.driver import Driver
from sw.gpushield.traces import KERNELS, kernel

SEED = int(os.environ.get("SEED") or "7")

# per kernel: parameter sets (defaults, the benchmark's sizes, and sizes that are not
# multiples of the warp, so that guards and partial warps matter)
PARAMS = {
    "streaming": [{}, {"n": 16384}, {"n": 1000}, {"n": 33}],
    "strided": [{}, {"n": 8192}, {"n": 64, "stride": 7}],
    "stencil2d": [{}, {"height": 66}, {"width": 50, "height": 7}, {"width": 33, "height": 3}],
    "matmul": [{}, {"n": 96}, {"n": 70}],
    "gather_scatter": [{}, {"n": 4096}, {"n": 96, "table": 100}],
    "bfs": [{}, {"nodes": 4096}, {"nodes": 100, "degree": 2}],
    "heap": [{}, {"warps": 512}, {"size": 4096, "warps": 5}],
    "type3": [{}, {"log2": 16}, {"log2": 10}],
    "many_buffers": [{}, {"n": 4096}, {"k": 5, "n": 96}],
    "mixed_ids": [{}, {"n": 4096}, {"n": 96, "k": 3}],
    "local": [{}, {"threads": 64, "words": 16}, {"threads": 32, "words": 3}],
}
# the instructions a sound and reasonably complete analysis proves, by hand from the code
# (affine index, known trip counts and sizes); every other one stays checked
PROVEN = {
    "streaming": {"load a[i]", "load b[i]", "store c[i]"},
    "strided": {"load x[i*stride]", "store y[i]"},
    "stencil2d": {"load grid[y][x]", "load grid[y-1][x]", "load grid[y+1][x]", "load grid[y][x-1]",
                  "load grid[y][x+1]", "store out[y][x]"},
    "matmul": {"load A tile", "load B tile", "store C tile"},
    "gather_scatter": {"load idx[i]", "load perm[i]"},
    "bfs": set(),
    "heap": {"store out[i]"},
    "type3": {"load a[i]", "load b[i]", "store c[i]"},
    "many_buffers": "all",
    "mixed_ids": {"store out[i]"},
    "local": {"store local[j]", "load local[j]"},
}


def _build(name, params, seed, analysis):
    drv = Driver(random.Random(seed))
    k = kernel(name, drv, seed=seed, analysis=analysis, **params)
    return drv, k, list(k.ops())


def _cases():
    return [pytest.param(name, params, id=f"{name}-{i}")
            for name in sorted(KERNELS) for i, params in enumerate(PARAMS[name])]


def test_every_kernel_has_cases():
    assert set(PARAMS) == set(KERNELS) == set(PROVEN), "a kernel without parameter sets or expectations"


# ---------------------------------------------------------------------------- soundness
@pytest.mark.parametrize("name,params", _cases())
def test_type1_accesses_in_bounds(name, params):
    """Every lane of every Type 1 op is inside its buffer as the driver allocated it, and
    no Type 1 op stores to a read-only buffer (the BCU skips both checks for Type 1)."""
    for seed in (SEED, SEED + 1, SEED + 2):
        drv, _, ops = _build(name, params, seed, analysis=True)
        for n, op in enumerate(ops):
            if not op.unchecked:
                continue
            size = 1 << op.size_log2
            for lane, x in enumerate(op.lanes):
                if x is None:
                    continue
                buf, off = x
                alloc = drv.buffers[buf]
                assert 0 <= off and off + size <= alloc.size, (
                    f"{name} {params} seed {seed}: Type 1 op {n} ({op.access}) lane {lane} touches bytes "
                    f"[{off}, {off + size}) of {buf}, allocated {alloc.size} bytes")
                assert not (op.store and alloc.read_only), (
                    f"{name} {params}: Type 1 op {n} ({op.access}) stores to read-only {buf}")


@pytest.mark.parametrize("name,params", _cases())
def test_descriptions_match_the_ops(name, params):
    """Each op names an instruction of the kernel's description with the op's direction,
    element size and buffer, and every lane of an affine instruction lies in the byte
    range the analysis computed for it (the description over-approximates the trace)."""
    drv, k, ops = _build(name, params, SEED, analysis=True)
    desc = k.describe()
    verdicts = analyse(desc)
    for n, op in enumerate(ops):
        a = desc.access(op.access)
        buf = desc.buffer(a.buffer)
        assert (a.store, a.elem_bytes) == (op.store, 1 << op.size_log2), f"{name} op {n}: {a} vs {op}"
        assert op.unchecked == verdicts[a.name].proven, f"{name} op {n}: Type 1 mark differs from the verdict"
        for x in op.lanes:
            if x is None:
                continue
            lane_buf, off = x
            if buf.per_thread:
                assert lane_buf.startswith(f"{a.buffer}["), f"{name} op {n}: lane in {lane_buf}, not a {a.buffer}[t]"
                assert drv.buffers[lane_buf].size == buf.bytes, f"{name}: {lane_buf} size differs from the description"
            elif a.index is not None:
                assert lane_buf == a.buffer, f"{name} op {n} ({a.name}): lane in {lane_buf}, described {a.buffer}"
            if a.index is not None:
                v = verdicts[a.name]
                assert v.lo <= off and off + a.elem_bytes <= v.hi, (
                    f"{name} op {n} ({a.name}): lane offset {off} outside the analysed range [{v.lo}, {v.hi})")
    for b in desc.buffers:
        if not b.per_thread:
            assert drv.buffers[b.name].size == b.bytes, f"{name}: buffer {b.name} described {b.bytes} bytes, " \
                                                        f"allocated {drv.buffers[b.name].size}"
            assert drv.buffers[b.name].read_only == b.read_only, f"{name}: {b.name} read-only flag differs"


@pytest.mark.parametrize("name,params", _cases())
def test_proven_instructions(name, params):
    """The analysis proves exactly the instructions expected by hand (Strided's second
    parameter set is not a multiple of 32 lanes, where the trace really overflows)."""
    _, k, _ = _build(name, params, SEED, analysis=True)
    proven = {a for a, v in analyse(k.describe()).items() if v.proven}
    want = {a.name for a in k.describe().accesses} if PROVEN[name] == "all" else PROVEN[name]
    assert proven == want, f"{name} {params}: proven {sorted(proven)}, expected {sorted(want)}"


@pytest.mark.parametrize("name,params", _cases())
def test_analysis_changes_only_the_marks(name, params):
    """With and without the analysis the ops are the same (buffers, lanes, offsets, sizes,
    direction); without it nothing is Type 1."""
    _, _, off = _build(name, params, SEED, analysis=False)
    _, _, on = _build(name, params, SEED, analysis=True)
    key = lambda o: (o.base, o.lanes, o.size_log2, o.store, o.access)  # noqa: E731
    assert [key(o) for o in off] == [key(o) for o in on], f"{name}: the analysis changed the access stream"
    assert not any(o.unchecked for o in off), f"{name}: Type 1 ops without the analysis"


def test_overflowing_kernel_not_proven():
    """Strided with n = 1000 (not a multiple of 32, no guard) really reads past x and
    writes past y in its last warp: neither instruction may be proven."""
    drv, k, ops = _build("strided", {"n": 1000}, SEED, analysis=True)
    overflow = [op.access for op in ops for x in op.lanes
                if x is not None and x[1] + 4 > drv.buffers[x[0]].size]
    assert set(overflow) == {"load x[i*stride]", "store y[i]"}, "the trace should overflow both buffers"
    assert not any(op.unchecked for op in ops), "an overflowing instruction was proven"


# ---------------------------------------------------------------------------- hand-written accesses
def _one(index, nbytes=4 * 256, store=False, read_only=False, guards=(), elem=4, variables=None):
    w, lane = loop("warp", 8), loop("lane", 32)
    variables = variables or (w, lane)
    desc = KernelDesc("k", (BufferDesc("a", nbytes, read_only),), variables,
                      (Access("x", "a", elem, index(*variables) if index else None, store, guards,
                              why="" if index else "data-dependent"),))
    return analyse(desc)["x"]


def test_in_bounds_affine_proven():
    assert _one(lambda w, lane: 32 * w + lane).proven                         # a[i], 256 elements
    assert _one(lambda w, lane: 255 - (32 * w + lane)).proven                 # reversed
    assert _one(lambda w, lane: 32 * w + lane, store=True).proven
    assert _one(lambda w, lane: 4 * (32 * w + lane) + 3, nbytes=4 * 1024).proven   # a[4i + 3]
    v = _one(lambda w, lane: 32 * w + lane, elem=8, nbytes=8 * 256)
    assert v.proven and (v.lo, v.hi) == (0, 8 * 256), v


def test_off_by_one_not_proven():
    """a[i + 1] over i < 256 with 256 elements: only the very last iteration (i = 255,
    element 256) is out — that is enough to stay checked. Same for a[i - 1] at i = 0."""
    v = _one(lambda w, lane: 32 * w + lane + 1)
    assert not v.proven and "overflow" in v.reason and v.hi == 4 * 257, v
    v = _one(lambda w, lane: 32 * w + lane - 1)
    assert not v.proven and "underflow" in v.reason and v.lo == -4, v
    # a buffer one element short of the loop
    assert not _one(lambda w, lane: 32 * w + lane, nbytes=4 * 255).proven
    # an element wider than the buffer's last slot: 8-byte accesses over 4-byte strides
    assert not _one(lambda w, lane: 32 * w + lane, elem=8, nbytes=8 * 256 - 4).proven


def test_data_dependent_not_proven():
    v = _one(None)
    assert not v.proven and "data-dependent" in v.reason


def test_store_to_read_only_not_proven():
    v = _one(lambda w, lane: 32 * w + lane, store=True, read_only=True)
    assert not v.proven and "read-only" in v.reason
    assert _one(lambda w, lane: 32 * w + lane, read_only=True).proven        # a load is fine


def test_guards():
    """A guard ``i < n`` makes a partial last warp provable; a guard on the wrong variable
    or a too wide guard does not."""
    n = 250
    i = lambda w, lane: 32 * w + lane  # noqa: E731
    assert not _one(i, nbytes=4 * n).proven
    w, lane = loop("warp", 8), loop("lane", 32)
    g = (Guard(32 * w + lane, 0, n - 1),)
    assert _one(i, nbytes=4 * n, guards=g, variables=(w, lane)).proven
    assert not _one(i, nbytes=4 * n, guards=(Guard(32 * w + lane, 0, n),), variables=(w, lane)).proven
    assert not _one(i, nbytes=4 * n, guards=(Guard(lane, 0, 31),), variables=(w, lane)).proven
    # a guard on x narrows (y w + x + 1) through its difference with x
    y, x = Var("y", 1, 6), Var("x", 0, 63)
    v = _one(lambda y, x: 64 * y + x + 1, nbytes=4 * 64 * 8, guards=(Guard(x, 1, 62),), variables=(y, x))
    assert v.proven and (v.lo, v.hi) == (4 * (64 + 2), 4 * (6 * 64 + 64)), v
    # guards that exclude everything: the instruction never runs
    v = _one(lambda w, lane: 32 * w + lane + 10_000, guards=(Guard(lane, 40, 50),), variables=(w, lane))
    assert v.proven and "never" in v.reason


def test_interval_bounds_match_brute_force():
    """bounds() equals the true min and max over the box; the guard-narrowed range
    contains every index value at points that satisfy the guards."""
    from sw.gpushield.analysis import _index_range
    rng = random.Random(SEED)
    for _ in range(300):
        vs = [Var(f"v{j}", lo, lo + rng.randrange(0, 5)) for j, lo in enumerate(rng.sample(range(-6, 6), 3))]
        coeff = [rng.randrange(-9, 10) for _ in vs]
        e = Affine(rng.randrange(-20, 20), tuple((v, c) for v, c in zip(vs, coeff) if c))
        pts = list(itertools.product(*(range(v.lo, v.hi + 1) for v in vs)))
        val = lambda expr, p: expr.const + sum(c * p[vs.index(v)] for v, c in expr.terms)  # noqa: E731
        values = [val(e, p) for p in pts]
        assert e.bounds() == (min(values), max(values)), f"{e}: {e.bounds()} vs brute force"
        g_expr = Affine(0, tuple((v, rng.randrange(-3, 4) or 1) for v in rng.sample(vs, 2)))
        glo = rng.randrange(-10, 10)
        g = Guard(g_expr, glo, glo + rng.randrange(0, 8))
        a = Access("x", "a", 4, e, guards=(g,))
        lo, hi = _index_range(a)
        for p in pts:
            if g.lo <= val(g_expr, p) <= g.hi:
                assert lo <= val(e, p) <= hi, f"{e} under {g}: value {val(e, p)} at {p} outside [{lo}, {hi}]"


# ---------------------------------------------------------------------------- bad descriptions
def test_bad_descriptions_raise():
    w = loop("w", 4)
    buf = (BufferDesc("a", 64),)
    bad = [
        lambda: Var("x", 3, 2),
        lambda: loop("x", 0),
        lambda: Var("", 0, 1),
        lambda: Var("x", 0, 1.5),
        lambda: w * w,                                          # not affine
        lambda: w * 1.5,
        lambda: Affine.of("w"),
        lambda: w + Var("w", 0, 9),                             # two variables named w
        lambda: Guard(w, 2, 1),
        lambda: BufferDesc("a", -1),
        lambda: Access("x", "a", 3, w),                         # 3-byte element
        lambda: Access("x", "a", 16, w),
        lambda: Access("x", "a", 4),                            # non-affine without a reason
        lambda: Access("x", "a", 4, w, guards=("i < n",)),
        lambda: KernelDesc("k", buf, (w,), (Access("x", "b", 4, w),)),                     # unknown buffer
        lambda: KernelDesc("k", buf, (), (Access("x", "a", 4, w),)),                       # undeclared variable
        lambda: KernelDesc("k", buf, (w,), (Access("x", "a", 4, w), Access("x", "a", 4, w))),
        lambda: KernelDesc("k", buf * 2, (w,), ()),
        lambda: KernelDesc("k", buf, (w, loop("w", 2)), ()),
        lambda: KernelDesc("k", buf, ("w",), ()),
        lambda: KernelDesc("k", buf, (w,), (Access("x", "a", 4, 2 * loop("w", 9)),)),    # another w
        lambda: analyse("not a description"),
    ]
    for n, make in enumerate(bad):
        with pytest.raises(ValueError):
            make()
            pytest.fail(f"bad description {n} accepted")


def test_generator_rejects_a_description_that_disagrees():
    """A description whose instruction is a load while the op stores must not lend its
    proof to the op."""
    drv = Driver(random.Random(SEED))
    k = kernel("streaming", drv, analysis=True, n=64)
    good = k.describe()
    swapped = tuple(Access(a.name, a.buffer, a.elem_bytes, a.index, not a.store, a.guards) for a in good.accesses)
    k.describe = lambda: KernelDesc(good.name, good.buffers, good.vars, swapped)
    with pytest.raises(ValueError, match="described as store"):
        list(k.ops())
