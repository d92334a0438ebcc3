"""Warp access traces of real kernel shapes, and violating requests.

A :class:`Kernel` allocates its buffers through the :class:`~sw.gpushield.driver.Driver`
(:meth:`Kernel.setup`) and yields :class:`WarpOp`s — one per warp-level memory instruction:
the buffer the warp's pointer derives from, and per lane a ``(buffer, byte offset)`` or
``None`` (inactive). :func:`to_request` turns an op into the BCU's :class:`WarpRequest`
with the pointers of a launch. Every op of every kernel is in bounds (and no store goes
to a read-only buffer): the no-false-positive traces.

Each kernel also describes its memory instructions for the compiler's bounds analysis
(:meth:`Kernel.describe`, a :class:`~sw.gpushield.analysis.KernelDesc`: buffers, loop and
thread variables with their ranges, one affine or non-affine access per instruction), and
every op names the instruction it comes from (``WarpOp.access``). A kernel built with
``analysis=True`` is the kernel as compiled with the analysis: the ops of the instructions
:func:`~sw.gpushield.analysis.analyse` proves in bounds are Type 1 (``unchecked``). With
``analysis=False`` (the default: the regression and the RCache benchmark need the checked
streams) every op is checked — Type 2, or Type 3 for Type 3 buffers. The two streams have
the same ops, lanes and offsets; only ``unchecked`` differs.

:func:`violations` yields requests that a correct BCU must reject, one per kind.
"""
import math
import random
from dataclasses import dataclass

from hw.gpushield.layout import VA_BITS, Cause

from .analysis import Access, BufferDesc, Guard, KernelDesc, Var, analyse, loop
from .model import WarpRequest, decrypt_id, encrypt_id, pointer_addr, pointer_eid, t1_pointer, t2_pointer, with_addr

__all__ = ["WarpOp", "Kernel", "KERNELS", "kernel", "to_request", "violations", "VIOLATIONS"]

LANES = 32
F32 = 2   # size_log2 of a 4-byte element


@dataclass
class WarpOp:
    base: str
    lanes: list                 # per lane: (buffer, byte offset) or None
    size_log2: int = F32
    store: bool = False
    unchecked: bool = False     # Type 1 (the compiler's analysis proved the instruction in bounds)
    access: str = None          # the memory instruction (an Access of the kernel's description)


def to_request(op, launch, tag=0, lanes=LANES):
    """The :class:`WarpRequest` of *op* under *launch* (inactive lanes carry address 0)."""
    if len(op.lanes) != lanes:
        raise ValueError(f"op has {len(op.lanes)} lanes, BCU {lanes}")

    def ptr(name, off):
        if op.unchecked:
            return t1_pointer(launch.buffers[name].base + off)
        return launch.ptr(name, off)

    addrs = [0 if x is None else ptr(*x) for x in op.lanes]
    mask = sum(1 << k for k, x in enumerate(op.lanes) if x is not None)
    return WarpRequest(ptr(op.base, 0), addrs, mask, op.size_log2, op.store, tag & 0xFFFF)


def _elems(first, n, limit, scale=4):
    """Byte offsets of elements first .. first+n-1 below *limit* (others inactive)."""
    return [scale * i if i < limit else None for i in range(first, first + n)]


def _threads(warps):
    """Variables of a 1-D launch of *warps* warps: the warp, the lane, and the thread
    index ``32 warp + lane``."""
    warp, lane = loop("warp", warps), loop("lane", LANES)
    return warp, lane, LANES * warp + lane


class Kernel:
    name = "kernel"

    def __init__(self, seed=0, analysis=False, **params):
        self.rng = random.Random(seed)
        self.analysis = bool(analysis)
        self.params = params
        self._proven = None

    def setup(self, driver):
        raise NotImplementedError

    def ops(self):
        raise NotImplementedError

    def describe(self):
        """The :class:`~sw.gpushield.analysis.KernelDesc` of the kernel as set up."""
        raise NotImplementedError

    def verdicts(self):
        """The analysis's :class:`~sw.gpushield.analysis.Verdict` per instruction."""
        return analyse(self.describe())

    def _type1(self, access, store, size_log2):
        """Whether the ops of instruction *access* are Type 1: proven, and only when the
        kernel is compiled with the analysis."""
        if not self.analysis:
            return False
        if self._proven is None:
            desc = self.describe()
            self._proven = {a.name: (v.proven, a.store, a.elem_bytes)
                            for a, v in zip(desc.accesses, analyse(desc).values())}
        if access not in self._proven:
            raise ValueError(f"{self.name}: op of instruction {access!r}, which the description lacks")
        proven, d_store, d_bytes = self._proven[access]
        if (d_store, d_bytes) != (store, 1 << size_log2):
            raise ValueError(f"{self.name}: instruction {access} is described as store={d_store}, "
                             f"{d_bytes} bytes; its op is store={store}, {1 << size_log2} bytes")
        return proven

    def _op(self, access, base, lanes, store=False, size_log2=F32):
        """An op of instruction *access*: lanes as ``(buffer, byte offset)`` or None."""
        lanes = list(lanes) + [None] * (LANES - len(lanes))
        return WarpOp(base, lanes, size_log2, store, self._type1(access, store, size_log2), access)

    def _warp(self, access, buf, offsets, store=False, size_log2=F32):
        """An op on one buffer: lane k at byte offsets[k] (None = inactive)."""
        return self._op(access, buf, [None if o is None else (buf, o) for o in offsets], store, size_log2)


class VecAdd(Kernel):
    """c[i] = a[i] + b[i]: streaming, coalesced."""
    name = "streaming"

    def setup(self, d, n=4096):
        self.n = n
        d.alloc_global("a", 4 * n, read_only=True)
        d.alloc_global("b", 4 * n, read_only=True)
        d.alloc_global("c", 4 * n)

    def ops(self):
        for w in range(math.ceil(self.n / LANES)):
            off = _elems(w * LANES, LANES, self.n)
            yield self._warp("load a[i]", "a", off)
            yield self._warp("load b[i]", "b", off)
            yield self._warp("store c[i]", "c", off, store=True)

    def describe(self):
        warp, lane, i = _threads(math.ceil(self.n / LANES))
        if_i = (Guard(i, 0, self.n - 1),)       # if (i < n)
        return KernelDesc(self.name,
                          (BufferDesc("a", 4 * self.n, True), BufferDesc("b", 4 * self.n, True),
                           BufferDesc("c", 4 * self.n)),
                          (warp, lane),
                          (Access("load a[i]", "a", 4, i, guards=if_i), Access("load b[i]", "b", 4, i, guards=if_i),
                           Access("store c[i]", "c", 4, i, store=True, guards=if_i)))


class Strided(Kernel):
    """y[i] = x[i * stride]: each lane in a different cache line."""
    name = "strided"

    def setup(self, d, n=2048, stride=33):
        self.n, self.stride = n, stride
        d.alloc_global("x", 4 * n * stride, read_only=True)
        d.alloc_global("y", 4 * n)

    def ops(self):
        for w in range(math.ceil(self.n / LANES)):
            idx = range(w * LANES, (w + 1) * LANES)
            yield self._warp("load x[i*stride]", "x", [4 * i * self.stride for i in idx])
            yield self._warp("store y[i]", "y", [4 * i for i in idx], store=True)

    def describe(self):
        # no guard: every lane of every warp runs (in bounds only when 32 divides n)
        warp, lane, i = _threads(math.ceil(self.n / LANES))
        return KernelDesc(self.name,
                          (BufferDesc("x", 4 * self.n * self.stride, True), BufferDesc("y", 4 * self.n)),
                          (warp, lane),
                          (Access("load x[i*stride]", "x", 4, self.stride * i),
                           Access("store y[i]", "y", 4, i, store=True)))


class Stencil2D(Kernel):
    """5-point stencil on a W x H grid (interior points only)."""
    name = "stencil2d"
    TAPS = (("load grid[y-1][x]", -1, 0), ("load grid[y+1][x]", 1, 0),
            ("load grid[y][x-1]", 0, -1), ("load grid[y][x+1]", 0, 1))

    def setup(self, d, width=64, height=34):
        self.w, self.h = width, height
        d.alloc_global("grid", 4 * width * height, read_only=True)
        d.alloc_global("out", 4 * width * height)

    def ops(self):
        w = self.w
        for y in range(1, self.h - 1):
            for x0 in range(0, w, LANES):
                xs = [x if 0 < x < w - 1 else None for x in range(x0, x0 + LANES)]
                at = lambda dy, dx: [None if x is None else 4 * ((y + dy) * w + x + dx) for x in xs]  # noqa: E731
                yield self._warp("load grid[y][x]", "grid", at(0, 0))
                for access, dy, dx in self.TAPS:
                    yield self._warp(access, "grid", at(dy, dx))
                yield self._warp("store out[y][x]", "out", at(0, 0), store=True)

    def describe(self):
        w = self.w
        y = Var("y", 1, self.h - 2)                             # for y in 1 .. h-2
        xw, lane, x = _threads(math.ceil(w / LANES))            # x = 32 xw + lane
        if_x = (Guard(x, 1, w - 2),)                            # if (0 < x < w - 1)
        taps = [Access(name, "grid", 4, (y + dy) * w + x + dx, guards=if_x) for name, dy, dx in self.TAPS]
        return KernelDesc(self.name,
                          (BufferDesc("grid", 4 * w * self.h, True), BufferDesc("out", 4 * w * self.h)),
                          (y, xw, lane),
                          (Access("load grid[y][x]", "grid", 4, y * w + x, guards=if_x), *taps,
                           Access("store out[y][x]", "out", 4, y * w + x, store=True, guards=if_x)))


class MatMul(Kernel):
    """C = A B with 32 x 32 tiles staged through shared memory: warp r of a thread block
    loads row r of the A tile and of the B tile, then stores its row of the C tile."""
    name = "matmul"

    def setup(self, d, n=64):
        self.n = n
        for name in ("A", "B"):
            d.alloc_global(name, 4 * n * n, read_only=True)
        d.alloc_global("C", 4 * n * n)

    def ops(self):
        n, t = self.n, LANES
        for ti in range(n // t):
            for tj in range(n // t):
                for kt in range(n // t):
                    for r in range(t):
                        yield self._warp("load A tile", "A", [4 * ((ti * t + r) * n + kt * t + c) for c in range(t)])
                        yield self._warp("load B tile", "B", [4 * ((kt * t + r) * n + tj * t + c) for c in range(t)])
                for r in range(t):
                    yield self._warp("store C tile", "C", [4 * ((ti * t + r) * n + tj * t + c) for c in range(t)],
                                     store=True)

    def describe(self):
        n, t = self.n, LANES
        ti, tj, kt = (loop(v, n // t) for v in ("ti", "tj", "kt"))     # block (ti, tj), k tile kt
        r, c = loop("r", t), loop("lane", t)                           # warp r, lane c
        return KernelDesc(self.name,
                          (BufferDesc("A", 4 * n * n, True), BufferDesc("B", 4 * n * n, True),
                           BufferDesc("C", 4 * n * n)),
                          (ti, tj, kt, r, c),
                          (Access("load A tile", "A", 4, (ti * t + r) * n + kt * t + c),
                           Access("load B tile", "B", 4, (kt * t + r) * n + tj * t + c),
                           Access("store C tile", "C", 4, (ti * t + r) * n + tj * t + c, store=True)))


class GatherScatter(Kernel):
    """out[perm[i]] = table[idx[i]]: coalesced index load, random gather, random scatter."""
    name = "gather_scatter"

    def setup(self, d, n=2048, table=16384):
        self.n, self.table = n, table
        self.idx = [self.rng.randrange(table) for _ in range(n)]
        self.perm = list(range(n))
        self.rng.shuffle(self.perm)
        d.alloc_global("idx", 4 * n, read_only=True)
        d.alloc_global("perm", 4 * n, read_only=True)
        d.alloc_global("table", 4 * table, read_only=True)
        d.alloc_global("out", 4 * n)

    def ops(self):
        for w in range(self.n // LANES):
            idx = range(w * LANES, (w + 1) * LANES)
            yield self._warp("load idx[i]", "idx", [4 * i for i in idx])
            yield self._warp("load perm[i]", "perm", [4 * i for i in idx])
            yield self._warp("load table[idx[i]]", "table", [4 * self.idx[i] for i in idx])
            yield self._warp("store out[perm[i]]", "out", [4 * self.perm[i] for i in idx], store=True)

    def describe(self):
        warp, lane, i = _threads(self.n // LANES)
        n = self.n
        return KernelDesc(self.name,
                          (BufferDesc("idx", 4 * n, True), BufferDesc("perm", 4 * n, True),
                           BufferDesc("table", 4 * self.table, True), BufferDesc("out", 4 * n)),
                          (warp, lane),
                          (Access("load idx[i]", "idx", 4, i), Access("load perm[i]", "perm", 4, i),
                           Access("load table[idx[i]]", "table", 4, why="gather: the index is loaded from idx[]"),
                           Access("store out[perm[i]]", "out", 4, store=True,
                                  why="scatter: the index is loaded from perm[]")))


class BFS(Kernel):
    """Level-synchronous BFS over a random graph in CSR form: one frontier vertex per lane;
    neighbour loops diverge (partial masks), dist[] accesses are random."""
    name = "bfs"

    def setup(self, d, nodes=1024, degree=4):
        rng = self.rng
        adj = [sorted({rng.randrange(nodes) for _ in range(rng.randrange(1, 2 * degree))})
               for _ in range(nodes)]
        self.row = [0]
        for a in adj:
            self.row.append(self.row[-1] + len(a))
        self.col = [u for a in adj for u in a]
        self.nodes = nodes
        d.alloc_global("row_ptr", 4 * (nodes + 1), read_only=True)
        d.alloc_global("col", 4 * len(self.col), read_only=True)
        d.alloc_global("dist", 4 * nodes)

    def ops(self):
        dist = [None] * self.nodes
        dist[0] = 0
        frontier, level = [0], 0
        while frontier:
            nxt = []
            for w in range(0, len(frontier), LANES):
                vs = frontier[w:w + LANES]
                yield self._warp("load row_ptr[v]", "row_ptr", [4 * v for v in vs])
                yield self._warp("load row_ptr[v+1]", "row_ptr", [4 * (v + 1) for v in vs])
                deg = [self.row[v + 1] - self.row[v] for v in vs]
                for j in range(max(deg)):
                    live = [k for k, v in enumerate(vs) if deg[k] > j]
                    edges = [self.row[vs[k]] + j if k in live else None for k in range(len(vs))]
                    yield self._warp("load col[e]", "col", [None if e is None else 4 * e for e in edges])
                    us = [None if e is None else self.col[e] for e in edges]
                    yield self._warp("load dist[u]", "dist", [None if u is None else 4 * u for u in us])
                    new = [u if u is not None and dist[u] is None else None for u in us]
                    if any(u is not None for u in new):
                        yield self._warp("store dist[u]", "dist", [None if u is None else 4 * u for u in new],
                                         store=True)
                    for u in new:
                        if u is not None and dist[u] is None:
                            dist[u] = level + 1
                            nxt.append(u)
            frontier, level = nxt, level + 1

    def describe(self):
        v = "v is a frontier vertex, loaded from the previous level's output"
        e = "e = row_ptr[v] + j: loaded from row_ptr[]"
        u = "u = col[e]: a neighbour loaded from col[]"
        return KernelDesc(self.name,
                          (BufferDesc("row_ptr", 4 * (self.nodes + 1), True),
                           BufferDesc("col", 4 * len(self.col), True), BufferDesc("dist", 4 * self.nodes)),
                          (),
                          (Access("load row_ptr[v]", "row_ptr", 4, why=v),
                           Access("load row_ptr[v+1]", "row_ptr", 4, why=v),
                           Access("load col[e]", "col", 4, why=e), Access("load dist[u]", "dist", 4, why=u),
                           Access("store dist[u]", "dist", 4, store=True, why=u)))


class ManyBuffers(Kernel):
    """out[i] = sum of k inputs: k + 1 live buffers, more than the 4 L1 entries."""
    name = "many_buffers"

    def setup(self, d, k=8, n=1024):
        self.k, self.n = k, n
        for j in range(k):
            d.alloc_global(f"in{j}", 4 * n, read_only=True)
        d.alloc_global("out", 4 * n)

    def ops(self):
        for w in range(self.n // LANES):
            off = [4 * i for i in range(w * LANES, (w + 1) * LANES)]
            for j in range(self.k):
                yield self._warp(f"load in{j}[i]", f"in{j}", off)
            yield self._warp("store out[i]", "out", off, store=True)

    def describe(self):
        warp, lane, i = _threads(self.n // LANES)
        ins = [BufferDesc(f"in{j}", 4 * self.n, True) for j in range(self.k)]
        return KernelDesc(self.name, (*ins, BufferDesc("out", 4 * self.n)), (warp, lane),
                          (*(Access(f"load {b.name}[i]", b.name, 4, i) for b in ins),
                           Access("store out[i]", "out", 4, i, store=True)))


class LocalArrays(Kernel):
    """Each thread spills to and reloads its own local array: one buffer (id) per thread,
    so every warp request carries 32 different ids (32 groups)."""
    name = "local"

    def setup(self, d, threads=64, words=4):
        self.threads, self.words = threads, words
        self.locals = d.alloc_local("local", 4 * words, threads)

    def ops(self):
        for w in range(self.threads // LANES):
            names = self.locals[w * LANES:(w + 1) * LANES]
            for j in range(self.words):
                for store in (True, False):
                    access = "store local[j]" if store else "load local[j]"
                    yield self._op(access, names[0], [(nm, 4 * j) for nm in names], store)

    def describe(self):
        j = loop("j", self.words)
        return KernelDesc(self.name, (BufferDesc("local", 4 * self.words, per_thread=True),), (j,),
                          (Access("store local[j]", "local", 4, j, store=True), Access("load local[j]", "local", 4, j)))


class PointerArray(Kernel):
    """out[i] = bufs[i % 4][i]: a pointer-array kernel, four ids per warp."""
    name = "mixed_ids"

    def setup(self, d, n=1024, k=4):
        self.n, self.k = n, k
        for j in range(k):
            d.alloc_global(f"buf{j}", 4 * n, read_only=True)
        d.alloc_global("out", 4 * n)

    def ops(self):
        for w in range(self.n // LANES):
            idx = range(w * LANES, (w + 1) * LANES)
            yield self._op("load bufs[i%k][i]", "buf0", [(f"buf{i % self.k}", 4 * i) for i in idx])
            yield self._warp("store out[i]", "out", [4 * i for i in idx], store=True)

    def describe(self):
        warp, lane, i = _threads(self.n // LANES)
        bufs = [BufferDesc(f"buf{j}", 4 * self.n, True) for j in range(self.k)]
        return KernelDesc(self.name, (*bufs, BufferDesc("out", 4 * self.n)), (warp, lane),
                          (Access("load bufs[i%k][i]", "buf0", 4,
                                  why="the pointer is loaded from a pointer array: its buffer is data-dependent"),
                           Access("store out[i]", "out", 4, i, store=True)))


class HeapKernel(Kernel):
    """Device-side malloc: 8-byte accesses to random chunks inside the one heap region."""
    name = "heap"

    def setup(self, d, size=1 << 16, warps=96):
        self.size, self.warps = size, warps
        d.alloc_heap("heap", size)
        d.alloc_global("out", 8 * LANES * warps)

    def ops(self):
        for w in range(self.warps):
            chunk = 64 * self.rng.randrange(self.size // 64)
            yield self._warp("load chunk[k%8]", "heap", [chunk + 8 * (k % 8) for k in range(LANES)], size_log2=3)
            yield self._warp("store out[i]", "out", [8 * (w * LANES + k) for k in range(LANES)], size_log2=3,
                             store=True)

    def describe(self):
        warp, lane, i = _threads(self.warps)
        return KernelDesc(self.name, (BufferDesc("heap", self.size), BufferDesc("out", 8 * LANES * self.warps)),
                          (warp, lane),
                          (Access("load chunk[k%8]", "heap", 8, why="the chunk pointer comes from device-side malloc"),
                           Access("store out[i]", "out", 8, i, store=True)))


class Type3Stream(Kernel):
    """Vector add through Type 3 pointers (size-aligned buffers, no RBT lookups)."""
    name = "type3"

    def setup(self, d, log2=14):
        self.n = (1 << log2) // 4
        for name in ("a", "b", "c"):
            d.alloc_t3(name, log2)

    def ops(self):
        for w in range(self.n // LANES // 4):
            off = [4 * i for i in range(w * LANES, (w + 1) * LANES)]
            yield self._warp("load a[i]", "a", off)
            yield self._warp("load b[i]", "b", off)
            yield self._warp("store c[i]", "c", off, store=True)

    def describe(self):
        warp, lane, i = _threads(self.n // LANES // 4)      # a quarter of each buffer
        return KernelDesc(self.name, tuple(BufferDesc(b, 4 * self.n) for b in "abc"), (warp, lane),
                          (Access("load a[i]", "a", 4, i), Access("load b[i]", "b", 4, i),
                           Access("store c[i]", "c", 4, i, store=True)))


KERNELS = {k.name: k for k in (VecAdd, Strided, Stencil2D, MatMul, GatherScatter, BFS,
                               ManyBuffers, LocalArrays, PointerArray, HeapKernel, Type3Stream)}


def kernel(name, driver, seed=0, analysis=False, **params):
    """Kernel *name* with its buffers allocated in *driver*; *analysis*: compiled with the
    bounds analysis (its proven instructions are Type 1)."""
    k = KERNELS[name](seed, analysis)
    k.setup(driver, **params)
    return k


# ---------------------------------------------------------------------------- violations
VIOLATIONS = ("overflow_by_one", "far_overflow", "underflow", "store_read_only", "stale_pointer",
              "other_kernel_entry", "forged_id", "invalid_type", "type_mismatch", "type3_outside",
              "mixed_one_bad_lane")


def _contig(launch, name, first_byte, lanes=LANES, size_log2=F32, store=False, mask=None):
    bytes_ = 1 << size_log2
    addrs = [launch.ptr(name, first_byte + bytes_ * k) for k in range(lanes)]
    mask = (1 << lanes) - 1 if mask is None else mask
    return WarpRequest(launch.ptr(name, 0), addrs, mask, size_log2, store)


def violations(launch, prev, rng, lanes=LANES):
    """``(kind, WarpRequest, expected cause or None)`` for every kind in :data:`VIOLATIONS`.
    *launch* is the current launch, *prev* an earlier one of the same buffers (for stale
    pointers). ``None`` = the model decides the cause (it must still be a violation)."""
    bufs = [b for b in launch.buffers.values() if b.kind != "t3" and b.size >= 4 * lanes + 64]
    ro = [b for b in bufs if b.read_only]
    t3 = [b for b in launch.buffers.values() if b.kind == "t3"]
    b = rng.choice(bufs)
    # one byte past the end: the last lane's 4-byte access covers size-3 .. size
    start = b.size - 4 * lanes + 1
    yield "overflow_by_one", _contig(launch, b.name, start, lanes=lanes), Cause.OUT_OF_BOUNDS
    # far overflow: a lane of the lowest buffer's pointer lands inside the highest buffer,
    # skipping over every buffer in between
    by_base = sorted(bufs, key=lambda o: o.base)
    if len(by_base) >= 2:
        lo_buf, hi_buf = by_base[0], by_base[-1]
        req = _contig(launch, lo_buf.name, 0, lanes=lanes)
        req.addrs[rng.randrange(lanes)] = launch.ptr(lo_buf.name, hi_buf.base + 16 - lo_buf.base)
        yield "far_overflow", req, Cause.OUT_OF_BOUNDS
    yield "underflow", _contig(launch, b.name, -4 * rng.randrange(1, 1000), lanes=lanes), Cause.OUT_OF_BOUNDS
    if ro:
        yield "store_read_only", _contig(launch, rng.choice(ro).name, 0, store=True, lanes=lanes), Cause.READ_ONLY
    if prev is not None:
        # a pointer kept from the earlier launch (old key): its id decrypts to a random id
        # under the new key; skip the one buffer in 16,384 whose new id it happens to be
        names = [x.name for x in bufs if x.name in prev.pointers and
                 decrypt_id(pointer_eid(prev.pointers[x.name]), launch.id_key) != x.id]
        name = rng.choice(names)
        req = _contig(launch, name, 0, lanes=lanes)
        old = prev.pointers[name]
        req.base = old
        req.addrs = [with_addr(old, pointer_addr(a)) for a in req.addrs]
        yield "stale_pointer", req, None
        # an id of the earlier kernel, encrypted with the current key: a valid entry of
        # another kernel (entries are not scrubbed between launches)
        ids = {x.id for x in launch.buffers.values()}
        olds = [x for x in prev.buffers.values() if x.kind != "t3" and x.id not in ids]
        if olds:
            x = rng.choice(olds)
            p = t2_pointer(x.base, encrypt_id(x.id, launch.id_key))
            req = WarpRequest(p, [with_addr(p, x.base + 4 * k) for k in range(lanes)],
                              (1 << lanes) - 1, F32, False)
            yield "other_kernel_entry", req, Cause.KERNEL
    req = _contig(launch, b.name, 0, lanes=lanes)
    flip = rng.randrange(1, 1 << 14)
    req.addrs = [a ^ (flip << VA_BITS) for a in req.addrs]
    req.base ^= flip << VA_BITS
    yield "forged_id", req, None
    req = _contig(launch, b.name, 0, lanes=lanes)
    k = rng.randrange(lanes)
    req.addrs[k] |= 3 << 62
    yield "invalid_type", req, Cause.POINTER_TYPE
    req = _contig(launch, b.name, 0, lanes=lanes)
    req.addrs[rng.randrange(lanes)] = t1_pointer(pointer_addr(req.addrs[0]))
    yield "type_mismatch", req, Cause.POINTER_TYPE
    if t3:
        t = rng.choice(t3)
        req = _contig(launch, t.name, t.size - 4 * lanes + 4 * rng.randrange(1, lanes), lanes=lanes)
        yield "type3_outside", req, Cause.OUT_OF_BOUNDS
    if len(bufs) >= 2:
        a, c = rng.sample(bufs, 2)
        req = _contig(launch, a.name, 0, lanes=lanes)
        for k in range(0, lanes, 2):
            req.addrs[k] = launch.ptr(c.name, 4 * k)
        k = rng.randrange(lanes)
        owner = a if k % 2 else c
        req.addrs[k] = launch.ptr(owner.name, owner.size + 4 * rng.randrange(0, 64))
        yield "mixed_one_bad_lane", req, Cause.OUT_OF_BOUNDS
