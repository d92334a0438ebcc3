"""Functional cover points of ``cc_ctrl`` (sampled by :class:`tb.cc.env.CtrlTB`'s monitor, for
every request the firewall accepts on ``mem_req``, from the model's state before the cycle).

``cc_access``: ``mode`` (the active CC mode) × ``access`` (initiator — host, the DMA engine,
another engine — × read/write × protected/open memory) and ``mode`` × ``flr`` (whether a
function-level reset has happened since power-on: the mode after an FLR is the stored one,
and the scrub it starts must leave the firewall as it was).
"""
from hw.cc.layout import Mode, Src
from tb.common.cover import Covergroup

__all__ = ["ACCESS", "CtrlCoverage", "access_class"]

MODES = [m.name for m in Mode]
ACCESSES = [f"{src}_{rw}_{region}" for src in ("host", "dma", "engine") for rw in ("read", "write")
            for region in ("protected", "open")]
ACCESS = Covergroup("cc_access", {"mode": MODES, "access": ACCESSES, "flr": ["before_flr", "after_flr"]},
                    crosses={"mode_x_access": ("mode", "access"), "mode_x_flr": ("mode", "flr")})


def access_class(src, addr, write, protected):
    """The ``access`` bin of a request: the 2-bit source code 3 is taken as the host (the
    firewall treats it so)."""
    src = {Src.DMA.value: "dma", Src.ENGINE.value: "engine"}.get(getattr(src, "value", src), "host")
    return f"{src}_{'write' if write else 'read'}_{'protected' if addr < protected else 'open'}"


class CtrlCoverage:
    def __init__(self):
        self.flr_seen = False

    def power_on(self):
        self.flr_seen = False

    def cycle(self, model, flr, req):
        """One monitored cycle: *flr* the pin, *req* the accepted request ``(src, addr,
        write, data)`` or None."""
        if req is not None:
            ACCESS.sample(mode=model.active.name, access=access_class(req[0], req[1], req[2], model.protected),
                          flr="after_flr" if self.flr_seen else "before_flr")
        if flr:
            self.flr_seen = True
