"""Functional cover points of the BCU (sampled by :class:`tb.gpushield.env.BcuTB`'s monitor
for every answer it scoreboards, from the model's :class:`~sw.gpushield.model.Result`).

``bcu_check`` (every request with at least one active lane; a warp with none checks nothing):
``ptr`` (the base pointer's decoded type; a Type 3 base with reserved bits set decodes as
INVALID) × ``level`` (the deepest RCache level its lookups reached: none, L1, L2, memory) ×
``cause`` (0..6); ``slot`` × ``level``; ``access`` (load, store) × ``cause``; ``mode``
(logging, precise) × ``outcome`` (pass, fail).

``bcu_ids``: Type 2 requests whose lanes were looked up, by the number of distinct encrypted
ids among them (one micro-op, or several).
"""
from hw.gpushield.layout import MAX_SLOTS, Cause, PtrType
from sw.gpushield.model import pointer_kind
from tb.common import cover
from tb.common.cover import Covergroup

__all__ = ["CHECK", "IDS", "BcuCoverage"]

PTRS = [k.name for k in PtrType]
LEVELS = ["none", "L1", "L2", "mem"]
CAUSES = [c.value for c in Cause]
LOOKUP = LEVELS[1:]
# the causes found before any lookup (front stage): inactive slot, pointer type, RBT store
FRONT = [Cause.KERNEL.value, Cause.POINTER_TYPE.value, Cause.RBT_STORE.value]

CHECK = Covergroup(
    "bcu_check",
    {"ptr": PTRS, "level": LEVELS, "cause": CAUSES, "slot": list(range(MAX_SLOTS)),
     "access": ["load", "store"], "mode": ["logging", "precise"], "outcome": ["pass", "fail"]},
    crosses={"ptr_x_level_x_cause": ("ptr", "level", "cause"), "slot_x_level": ("slot", "level"),
             "access_x_cause": ("access", "cause"), "mode_x_outcome": ("mode", "outcome")},
    ignore={
        "ptr_x_level_x_cause":
            # only Type 2 pointers are looked up in the RCache (Type 1 is not checked, Type 3
            # carries its bounds, an invalid type is refused before any lookup)
            [(p, lvl, None) for p in ("T1", "T3", "INVALID") for lvl in LOOKUP]
            # without a lookup there is no entry to be read-only or invalid
            + [(p, "none", c) for p in PTRS for c in (Cause.READ_ONLY.value, Cause.INVALID_ENTRY.value)]
            # Type 1 has no bounds to be out of
            + [("T1", "none", Cause.OUT_OF_BOUNDS.value)]
            # an INVALID base makes every active lane a type mismatch (cause 5) unless the slot
            # is inactive (cause 3, checked first): it neither passes, nor reaches bounds or
            # the RBT-store check
            + [("INVALID", "none", c) for c in (Cause.NONE.value, Cause.OUT_OF_BOUNDS.value,
                                                Cause.RBT_STORE.value)]
            # a Type 2 request with active lanes is looked up unless the front stage refused
            # it (causes 3, 5, 6); once looked up, the front-stage causes 5 and 6 are past
            + [("T2", "none", c) for c in CAUSES if c not in FRONT]
            + [("T2", lvl, c) for lvl in LOOKUP for c in (Cause.POINTER_TYPE.value, Cause.RBT_STORE.value)],
        # a load cannot write a read-only buffer or the RBT
        "access_x_cause": [("load", Cause.READ_ONLY.value), ("load", Cause.RBT_STORE.value)],
    })
IDS = Covergroup("bcu_ids", {"ids": ["one", "several"]})


class BcuCoverage:
    def answer(self, request, result, slot, precise):
        """Sample one scoreboarded answer: *result* is the model's for *request* on *slot*."""
        if not cover.ENABLED or not request.active():     # the work below only when bins count
            return
        lookups = [u for u in result.uops if u.eid is not None]
        level = max((LEVELS.index(u.level) for u in lookups), default=0)
        CHECK.sample(ptr=pointer_kind(request.base).name, level=LEVELS[level], cause=result.cause.value,
                     slot=slot, access="store" if request.store else "load",
                     mode="precise" if precise else "logging", outcome="pass" if result.ok else "fail")
        if lookups:
            IDS.sample(ids="one" if len(lookups) == 1 else "several")
