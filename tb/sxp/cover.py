"""Functional cover points of the SXP (sampled by :class:`tb.sxp.env.SxpTB`'s monitor and CSR
helpers, from what the model did with each packet and register access).

- ``sxp_exception``: every security exception the model raises: ``cause`` (the seven
  :class:`hw.sxp.regs.Cause` s) × ``direction`` (a write request on ``xb_i``, a read request
  on ``xb_i``, a completion on ``pcie_i``, a CSR write) and ``cause`` × ``mode`` (the packet's
  ``aes`` bit: encrypted or clear; none for a CSR write).
- ``sxp_frame``: every encrypted write frame whose last packet (``cc``) passed its checks:
  its ``size`` (bytes over its packets, up to 128, 256, 512, 1024) × ``lanes`` of the design.
- ``sxp_parked``: every parked read released when its context's read frame completes, by
  physical ``context``.
- ``sxp_trusted``: trusted-mode transitions: entered, refused (CONFIG), a host write or read
  denied while trusted, left by a reset.
"""
from hw.sxp.packet import Kind
from hw.sxp.regs import Cause
from tb.common.cover import Covergroup

__all__ = ["EXCEPTION", "FRAME", "TRUSTED", "SxpCoverage", "SIZES", "parked_group"]

CAUSES = [c.name for c in Cause if c is not Cause.NONE]
DIRECTIONS = ["write", "read", "completion", "csr"]
SIZES = [128, 256, 512, 1024]
_REQUEST_ONLY = ("MAP", "REGION", "CLEAR")   # checks of requests against the key map and regions
EXCEPTION = Covergroup(
    "sxp_exception", {"cause": CAUSES, "direction": DIRECTIONS, "mode": ["aes", "clear", "none"]},
    crosses={"cause_x_direction": ("cause", "direction"), "cause_x_mode": ("cause", "mode")},
    ignore={
        # a read request carries no data, so no engine op refuses it; AUTH checks a read
        # completion's tag; CONFIG comes only from a CTRL write; a CSR write raises only CONFIG;
        # MAP/REGION/CLEAR check requests only
        "cause_x_direction": [("FRAME", "read"), ("CONFIG", "write"), ("CONFIG", "read"),
                              ("CONFIG", "completion")]
        + [("AUTH", d) for d in ("write", "read", "csr")]
        + [(c, "csr") for c in CAUSES if c != "CONFIG"]
        + [(c, "completion") for c in _REQUEST_ONLY],
        # MAP/REGION check aes requests, CLEAR clear ones; AUTH and FRAME come from the engines
        # (aes); only CONFIG has no packet
        "cause_x_mode": [("MAP", "clear"), ("REGION", "clear"), ("CLEAR", "aes"), ("AUTH", "clear"),
                         ("FRAME", "clear"), ("CONFIG", "aes"), ("CONFIG", "clear")]
        + [(c, "none") for c in CAUSES if c != "CONFIG"]})
FRAME = Covergroup("sxp_frame", {"size": SIZES, "lanes": [1, 4]}, crosses={"size_x_lanes": ("size", "lanes")})
TRUSTED = Covergroup("sxp_trusted", {"transition": ["entered", "refused", "host_write_denied",
                                                    "host_read_denied", "left_by_reset"]})
_PARKED = {}


def parked_group(contexts):
    """``sxp_parked`` for *contexts* physical contexts (declared once per process)."""
    if contexts not in _PARKED:
        _PARKED[contexts] = Covergroup("sxp_parked", {"context": list(range(contexts))})
    return _PARKED[contexts]


class SxpCoverage:
    def __init__(self, lanes, contexts):
        self.lanes = lanes
        self.parked = parked_group(contexts)
        self.frame_bytes = {}       # xbctx -> bytes of the open encrypted write frame

    def _exceptions(self, model, before, direction, aes):
        for e in model.exceptions[before:]:
            EXCEPTION.sample(cause=e.cause.name, direction=direction, mode=aes)

    def request(self, model, hdr, before):
        """After the model took request *hdr*; *before*: ``len(model.exceptions)`` before."""
        read = hdr["kind"] == Kind.READ_REQ
        self._exceptions(model, before, "read" if read else "write", "aes" if hdr["aes"] else "clear")
        if read or not hdr["aes"]:
            return
        if len(model.exceptions) > before:
            self.frame_bytes.pop(hdr["xbctx"], None)
            return
        size = self.frame_bytes.get(hdr["xbctx"], 0) + hdr["length"]
        self.frame_bytes[hdr["xbctx"]] = size
        if hdr["cc"]:
            del self.frame_bytes[hdr["xbctx"]]
            FRAME.sample(size=next((s for s in SIZES if size <= s), SIZES[-1]), lanes=self.lanes)

    def completion(self, model, hdr, released, before):
        self._exceptions(model, before, "completion", "aes" if hdr["aes"] else "clear")
        for p in released:
            self.parked.sample(context=p.hdr["key_index"])

    def csr_write(self, model, port, trusted, denied, before):
        """After the model took a CSR write; *trusted*, *denied*, *before*: the model's
        ``trusted``, ``denied`` and exception count before it."""
        self._exceptions(model, before, "csr", "none")
        if model.trusted and not trusted:
            TRUSTED.sample(transition="entered")
        if any(e.cause is Cause.CONFIG for e in model.exceptions[before:]):
            TRUSTED.sample(transition="refused")
        if port == "host" and model.denied != denied:
            TRUSTED.sample(transition="host_write_denied")

    def csr_read(self, model, port, denied):
        if port == "host" and model.denied != denied:
            TRUSTED.sample(transition="host_read_denied")

    def reset(self, trusted):
        """A reset; *trusted*: the model's trusted mode before it."""
        self.frame_bytes.clear()
        if trusted:
            TRUSTED.sample(transition="left_by_reset")
