"""The ``cc_ctrl`` register map (BAR0 as the host sees it) and the BAR0 decoupler's
allow-list: which register each mode lets the host read or write. Both are data, used by
the RTL (:mod:`hw.cc.ctrl`), the golden model (:mod:`sw.cc.model`) and the generated
documentation (:func:`doc_tables`, written into docs/cc.md by ``python -m scripts.gen_docs``)."""
import functools
from pathlib import Path

from hw.csr import Access, Field, Register, RegisterMap

from .layout import Mode

__all__ = ["register_map", "ALLOW", "ROWS", "SCRUB", "allowed", "KEY_WORDS", "SCRATCH_WORDS",
           "DOC", "DOC_BEGIN", "DOC_END", "doc_tables", "ADDR_WIDTH", "FW_ADDR_BITS"]

R, W, RW, W1C, WO = Access.R, Access.W, Access.RW, Access.W1C, Access.WO
ADDR_WIDTH = 8          # BAR0 byte address bits of the model (256 bytes)
KEY_WORDS = 8           # KEY0..7: a 256-bit key slot (e.g. the session key state)
SCRATCH_WORDS = 4       # stand-ins for the rest of the GPU's register space
FW_ADDR_BITS = 20       # FW_LOG.addr: memory word address (depth <= 2^20 words)


def register_map():
    regs = [
        Register(0x00, "CC_MODE", "Active mode, pending mode (the persistent store), scrub", [
            Field("active", 2, R, desc="mode in force since the last reset (0 off, 1 on, 2 devtools)"),
            Field("pending", 2, R, desc="the mode store: becomes active at the next FLR"),
            Field("scrubbing", 1, R, desc="1 while the reset scrub runs (host access blocked)"),
        ]),
        Register(0x04, "CC_MODE_SET", "Write the persistent mode store", [
            Field("mode", 2, W, desc="new mode, effective at the next FLR; 3 is ignored and sets CC_STATUS.bad_mode"),
        ]),
        Register(0x08, "CC_STATUS", "Sticky status", [
            Field("fault", 1, W1C, desc="an engine write outside the protected region was refused"),
            Field("bad_mode", 1, W1C, desc="a write of mode code 3 to CC_MODE_SET was ignored"),
        ]),
        Register(0x0C, "DEC_COUNT", "Host register accesses refused by the decoupler", [
            Field("count", 32, R, desc="since the last reset (saturating)"),
        ]),
        Register(0x10, "DEC_LOG", "The last refused host register access", [
            Field("addr", ADDR_WIDTH, R, desc="its BAR0 byte address"),
            Field("write", 1, R, desc="1: a write, 0: a read"),
        ]),
        Register(0x14, "FW_COUNT", "Memory accesses refused by the firewall", [
            Field("count", 32, R, desc="since the last reset (saturating)"),
        ]),
        Register(0x18, "FW_LOG", "The last refused memory access", [
            Field("addr", FW_ADDR_BITS, R, desc="word address"),
            Field("src", 2, R, offset=24, desc="initiator (0 host, 1 DMA, 2 engine)"),
            Field("write", 1, R, offset=28, desc="1: a write"),
        ]),
        Register(0x20, "PERF_CTRL", "Performance counter control", [
            Field("en", 1, RW, desc="count (in CC off and devtools; CC on holds the counters at zero)"),
        ]),
        Register(0x24, "PERF_CYCLES", "Cycles counted while enabled", [
            Field("count", 32, R, desc="wrapping"),
        ]),
        Register(0x28, "PERF_ACCESSES", "Memory accesses accepted while enabled", [
            Field("count", 32, R, desc="wrapping"),
        ]),
    ]
    regs += [Register(0x40 + 4 * k, f"KEY{k}", f"Key state, bits {32 * k + 31}..{32 * k} (write-only)", [
        Field("key", 32, WO, desc="reads as zero; scrubbed by every reset")]) for k in range(KEY_WORDS)]
    regs += [Register(0x80 + 4 * k, f"SCRATCH{k}", "General GPU register (stand-in)", [
        Field("value", 32, RW, desc="scrubbed by every reset")]) for k in range(SCRATCH_WORDS)]
    return RegisterMap("cc_ctrl", regs, addr_width=ADDR_WIDTH,
                       desc="BAR0 of the confidential-mode controller (hw/cc/regs.py).")


SCRUB = "SCRUB"                                   # the row used while the scrub runs
ROWS = (Mode.OFF, Mode.ON, Mode.DEVTOOLS, SCRUB)

# register name (or prefix ending in '*') -> host permission per row, in ROWS order.
# "r" read, "w" write, "rw" both, "-" refused. Addresses not listed are refused in every
# row (in CC off too: there is nothing there).
ALLOW = {
    "CC_MODE":       ("r",  "r",  "r",  "r"),
    "CC_MODE_SET":   ("w",  "w",  "w",  "-"),
    "CC_STATUS":     ("rw", "rw", "rw", "-"),
    "DEC_COUNT":     ("r",  "r",  "r",  "-"),
    "DEC_LOG":       ("r",  "r",  "r",  "-"),
    "FW_COUNT":      ("r",  "r",  "r",  "-"),
    "FW_LOG":        ("r",  "r",  "r",  "-"),
    "PERF_CTRL":     ("rw", "-",  "rw", "-"),
    "PERF_CYCLES":   ("r",  "-",  "r",  "-"),
    "PERF_ACCESSES": ("r",  "-",  "r",  "-"),
    "KEY*":          ("w",  "-",  "-",  "-"),
    "SCRATCH*":      ("rw", "-",  "-",  "-"),
}


def _perm(name):
    for key, perms in ALLOW.items():
        if key == name or (key.endswith("*") and name.startswith(key[:-1])):
            return perms
    raise KeyError(f"register {name} has no allow-list entry")


def allowed(row, addr, write):
    """Does the decoupler pass a host read (*write* False) or write of byte address *addr*
    in *row* (a :class:`Mode` or :data:`SCRUB`)?"""
    name = _register_names().get(addr)
    return name is not None and ("w" if write else "r") in _perm(name)[ROWS.index(row)]


@functools.cache
def _register_names():
    # {address: register name}, built once: the testbench's model asks every cycle
    return {r.addr: r.name for r in register_map()}


# ---------------------------------------------------------------------------- documentation
DOC = Path(__file__).resolve().parents[2] / "docs" / "cc.md"
DOC_BEGIN = "<!-- BEGIN generated by python -m scripts.gen_docs -->"
DOC_END = "<!-- END generated -->"


def doc_tables():
    """The allow-list table and the register map, as inserted in docs/cc.md."""
    names = {Mode.OFF: "CC off", Mode.ON: "CC on", Mode.DEVTOOLS: "devtools", SCRUB: "scrubbing"}
    lines = [DOC_BEGIN, "", "### BAR0 decoupler allow-list (host port)", "",
             "| Address | Register | " + " | ".join(names[r] for r in ROWS) + " |",
             "|---|---|" + "---|" * len(ROWS)]
    for r in register_map():
        perms = [p if p != "-" else "—" for p in _perm(r.name)]
        lines.append(f"| 0x{r.addr:02x} | {r.name} | " + " | ".join(perms) + " |")
    lines += ["", "r: the host may read, w: may write, —: refused (reads zero, write ignored, "
              "counted in DEC_COUNT, address latched in DEC_LOG). Any address not in the "
              "table is refused in every row.", ""]
    lines.append(register_map().markdown(heading="###").rstrip("\n"))
    lines += ["", DOC_END]
    return "\n".join(lines)
