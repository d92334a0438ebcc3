"""Functional coverage: cover points and crosses, on cocotb-coverage.

A testbench declares its cover groups once, at import (``tb/<block>/cover.py``), and its
monitors and scoreboards call ``group.sample(point=value, …)`` for every transaction they
check. A group is a set of named cover points, each with the list of its bins (the values
a monitor passes: a sampled value that is not a bin is an error, so that a cover point
cannot silently miss what it was meant to count), and crosses of some of them (every
combination of their bins, less the ``ignore`` patterns that cannot happen by design).

The bins live in cocotb-coverage's ``coverage_db`` (one per simulator process, so the
cocotb tests of one pytest test add up). When ``FCOV_FILE`` is set (``make coverage``:
:func:`tb.common.sim.run`), the hits of every group declared in the process are written
there as JSON when the simulator exits; ``scripts/coverage.py`` merges the files of every
test and block, reports the bins and fails ``make coverage`` on a bin that no test hit.

Sampling costs about 17 µs a call (cocotb-coverage's decorators; measured on ``gcm_op``), a
quarter of a ``gcm_core`` cycle in the regression, so groups sample only while the bins are
collected (``FCOV_FILE`` set, or :data:`ENABLED` set true): ``make sim`` runs the same tests
and stimulus without paying for it.

File format (``FCOV_FILE``): ``{"<group>.<item>": {"kind": "point"|"cross", "items": [...],
"bins": {"<label>": hits}}}``; the label of a cross bin joins its points' bins with " × ".
"""
import atexit
import json
import os
from pathlib import Path

from cocotb_coverage.coverage import CoverCross, CoverPoint, coverage_db

__all__ = ["Covergroup", "GROUPS", "ENABLED", "snapshot", "write", "bin_label", "CROSS_SEPARATOR"]

CROSS_SEPARATOR = " × "
GROUPS = {}     # name -> Covergroup, every group declared in this process
ENABLED = bool(os.environ.get("FCOV_FILE"))     # whether sample() counts (module docstring)


def bin_label(value):
    """The label of a bin in reports: the value itself for a point, its points' bins joined
    with " × " for a cross (a tuple)."""
    if isinstance(value, tuple):
        return CROSS_SEPARATOR.join(bin_label(v) for v in value)
    return str(value)


class Covergroup:
    """Cover points and crosses sampled together.

    *points*: ``{name: [bin, …]}`` (bins are hashable values such as strings, ints, bools).
    *crosses*: ``{name: (point, point, …)}``. *ignore*: ``{cross name: [pattern, …]}``, each
    pattern a tuple with one entry per crossed point, ``None`` matching any bin: the
    combinations that cannot happen by design (say why where you declare them)."""

    def __init__(self, name, points, crosses=None, ignore=None):
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"cover group name must be a non-empty string without '.', not {name!r}")
        if name in GROUPS:
            raise ValueError(f"cover group {name!r} is declared twice")
        if not isinstance(points, dict) or not points:
            raise TypeError(f"{name}: points must be a non-empty dict of point name -> list of bins")
        crosses = dict(crosses or {})
        ignore = dict(ignore or {})
        for point, bins in points.items():
            if not isinstance(bins, (list, tuple)) or not bins:
                raise TypeError(f"{name}.{point}: bins must be a non-empty list, not {bins!r}")
            if len(set(bins)) != len(bins):
                raise ValueError(f"{name}.{point}: duplicate bins in {bins!r}")
        for cross, items in crosses.items():
            if cross in points:
                raise ValueError(f"{name}: cross {cross!r} has the name of a point")
            unknown = [i for i in items if i not in points]
            if len(items) < 2 or unknown:
                raise ValueError(f"{name}.{cross}: a cross needs two or more declared points "
                                 f"(unknown: {unknown})" if unknown else
                                 f"{name}.{cross}: a cross needs two or more points, not {items!r}")
        for cross, patterns in ignore.items():
            if cross not in crosses:
                raise ValueError(f"{name}: ignore names {cross!r}, which is not a cross")
            for pattern in patterns:
                if len(pattern) != len(crosses[cross]):
                    raise ValueError(f"{name}.{cross}: ignore pattern {pattern!r} needs "
                                     f"{len(crosses[cross])} entries")
                for point, value in zip(crosses[cross], pattern):
                    if value is not None and value not in points[point]:
                        raise ValueError(f"{name}.{cross}: ignore pattern {pattern!r}: {value!r} "
                                         f"is not a bin of {point}")
        self.name = name
        self.points = {p: list(b) for p, b in points.items()}
        self.crosses = {c: tuple(i) for c, i in crosses.items()}
        order = list(self.points)
        # a cross is declared from its points' bins, so the points come first; and a cross
        # counts the bins its points matched in the same call, so the points' wrappers go
        # outside the crosses' (decorators apply from the inside out)
        point_items = [CoverPoint(f"{name}.{p}", xf=_pick(i), bins=self.points[p]) for i, p in enumerate(order)]
        cross_items = [CoverCross(f"{name}.{c}", items=[f"{name}.{i}" for i in items], ign_bins=ignore.get(c, []))
                       for c, items in self.crosses.items()]
        sampler = _accept
        for item in cross_items + point_items[::-1]:
            sampler = item(sampler)
        self._order = order
        self._sampler = sampler
        GROUPS[name] = self

    def sample(self, **values):
        """Count one transaction: a value for every point of the group, each one of its bins
        (nothing happens unless :data:`ENABLED`)."""
        if not ENABLED:
            return
        if set(values) != set(self._order):
            missing, extra = set(self._order) - set(values), set(values) - set(self._order)
            raise TypeError(f"{self.name}.sample: missing points {sorted(missing)}, unknown {sorted(extra)}")
        for point, value in values.items():
            if value not in self.points[point]:
                raise ValueError(f"{self.name}.{point}: sampled {value!r}, which is not one of its "
                                 f"bins {self.points[point]!r}")
        self._sampler(*(values[p] for p in self._order))

    def items(self):
        """``{"<group>.<item>": (kind, items)}`` of this group."""
        out = {f"{self.name}.{p}": ("point", [p]) for p in self.points}
        out.update({f"{self.name}.{c}": ("cross", list(i)) for c, i in self.crosses.items()})
        return out


def _accept(*values):
    return None


def _pick(index):
    return lambda *values: values[index]


def snapshot():
    """The hits of every declared group, in the ``FCOV_FILE`` format."""
    out = {}
    for group in GROUPS.values():
        for full, (kind, items) in group.items().items():
            hits = coverage_db[full].detailed_coverage
            out[full] = {"kind": kind, "items": items,
                         "bins": {bin_label(b): int(n) for b, n in hits.items()}}
    return out


def write(path):
    """Write :func:`snapshot` to *path* (JSON)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(snapshot(), indent=1, ensure_ascii=False) + "\n")


def _write_at_exit():
    target = os.environ.get("FCOV_FILE")
    if target and GROUPS:
        write(target)


atexit.register(_write_at_exit)
