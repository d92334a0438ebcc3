"""Functional cover points of ``gcm_core`` (sampled by :class:`tb.gcm.env.GcmTB`'s monitor,
for every beat the core accepts on ``i``, from the model's state before the beat).

``gcm_op``: ``op`` (IV, DATA, MAC, NOP) × ``switch`` (the context of the beat before on
``i`` was the same one, another one, or a key was installed on this context since its
last beat: a re-key between or inside frames) and ``op`` × ``misuse`` (none; no key on the
context; DATA/MAC on an idle context; IV on a context with a frame open; IV whose lane 0
does not end in 00000001).
"""
from hw.gcm.layout import Op
from sw.gcm.model import J0_TAIL, NONCE_BITS, split_beat
from tb.common.cover import Covergroup

__all__ = ["OP", "GcmCoverage"]

OPS = [op.name for op in Op]
MISUSE = ["none", "no_key", "idle_context", "iv_on_open_frame", "bad_iv_tail"]
OP = Covergroup(
    "gcm_op", {"op": OPS, "switch": ["same_ctx", "other_ctx", "after_key"], "misuse": MISUSE},
    crosses={"op_x_switch": ("op", "switch"), "op_x_misuse": ("op", "misuse")},
    # a NOP reads no context, so it cannot misuse one; an IV is the one op an idle context
    # takes, and only an IV has an IV tail or can open a frame on an open one
    ignore={"op_x_misuse": [("NOP", m) for m in MISUSE[1:]] + [("IV", "idle_context")]
            + [(op, m) for op in ("DATA", "MAC") for m in ("iv_on_open_frame", "bad_iv_tail")]})


class GcmCoverage:
    def __init__(self):
        self.reset()

    def reset(self):
        self.last_ctx = None
        self.keyed_since = set()    # contexts given a key since their last beat

    def key(self, ctx):
        self.keyed_since.add(ctx)

    def beat(self, model, ctx, op, block, lanes):
        """Sample one accepted beat; call before the model steps it."""
        op = Op(op)
        switch = ("after_key" if ctx in self.keyed_since else
                  "same_ctx" if ctx == self.last_ctx else "other_ctx")
        self.keyed_since.discard(ctx)
        self.last_ctx = ctx
        misuse = "none"
        if op is not Op.NOP:
            c = model._ctx[ctx] if ctx < model.contexts else None
            lane0 = split_beat(block, lanes)[0]
            if c is None or not c.has_key:
                misuse = "no_key"
            elif op is Op.IV and c.active:
                misuse = "iv_on_open_frame"
            elif op is Op.IV and lane0 >> NONCE_BITS != int.from_bytes(J0_TAIL, "little"):
                misuse = "bad_iv_tail"
            elif op is not Op.IV and not c.active:
                misuse = "idle_context"
        OP.sample(op=op.name, switch=switch, misuse=misuse)
