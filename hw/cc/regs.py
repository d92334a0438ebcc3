"""The ``cc_ctrl`` register map (BAR0 as the host sees it) and the BAR0 decoupler's
allow-list: which register each mode lets the host read or write. Both are data, used by
the RTL (:mod:`hw.cc.ctrl`), the golden model (:mod:`sw.cc.model`) and the generated
documentation (:func:`doc_tables`, written into docs/cc.md by ``python -m scripts.gen_docs``).

:func:`gpu_register_map` is ``gpu_cc``'s own registers beside that map (hw/cc/gpu.py): the
DMA key block and the RTS window on the firmware port, ``GPU_READY`` on both ports. They
are not ``cc_ctrl``'s: its decoupler never sees ``GPU_READY``, and a host access to any
other of them reaches ``cc_ctrl``, which refuses it (not in :data:`ALLOW`)."""
import functools
from pathlib import Path

from hw.csr import Access, Field, Register, RegisterMap

from .layout import Mode

__all__ = ["register_map", "ALLOW", "ROWS", "SCRUB", "allowed", "KEY_WORDS", "SCRATCH_WORDS",
           "DOC", "DOC_BEGIN", "DOC_END", "doc_tables", "ADDR_WIDTH", "FW_ADDR_BITS",
           "gpu_register_map", "DMA_KEY_CTRL", "DMA_KEY_IV", "DMA_KEY_STATUS", "GPU_READY",
           "DMA_KEY_GO", "RTS_CTRL", "RTS_STATUS", "RTS_COUNT", "RTS_REFUSED", "RTS_DATA", "RTS_WORDS",
           "RTS_EXTEND", "RTS_READ", "RTS_SLOTS", "field_values"]

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


# ---------------------------------------------------------------------------- gpu_cc's own
DMA_KEY_CTRL = 0xC0     # fw W: bits 3:0 channel, bit 8 go (install KEY0..7 with DMA_KEY_IV)
DMA_KEY_IV = 0xC4       # fw RW: the first IV counter of the next install (both directions)
DMA_KEY_STATUS = 0xC8   # fw R: bit 0 busy, bit 1 refused (a go in CC off), bits 15:8 installs
DMA_KEY_GO = 1 << 8     # DMA_KEY_CTRL.go
GPU_READY = 0x94        # host RW / fw R: the GPU ready state the CVM sets after verification
RTS_CTRL = 0x98         # fw W: bits 5:0 slot, bit 8 extend by RTS_DATA, bit 9 read into RTS_DATA
RTS_STATUS = 0x9C       # fw R: busy, refused, rts ready; owner and bound of the last read
RTS_COUNT = 0xA0        # fw R: extend count of the last slot read
RTS_REFUSED = 0xA4      # fw R: extends refused for the owner lock since the cold reset
RTS_DATA = 0xCC         # fw: RTS_DATA0..11 at 0xCC + 4k (W: extend value, R: last read value)
RTS_WORDS = 12          # 384 bits
RTS_EXTEND, RTS_READ = 1 << 8, 1 << 9
RTS_SLOTS = 64          # the H100's RTS: up to 64 independent measurements


def gpu_register_map():
    """``gpu_cc``'s registers beside ``cc_ctrl``'s map (the port each is on in brackets)."""
    regs = [
        Register(GPU_READY, "GPU_READY", "The GPU ready state (host RW, firmware R)", [
            Field("ready", 1, RW, desc="set by the CVM once its verifier accepted the attestation report; "
                  "while CC is on (or devtools) and this is 0, DMA descriptors are refused (held, "
                  "not taken). Cleared by every reset and FLR and whenever the mode store differs "
                  "from the active mode (a mode change pending); a write of 1 is ignored then. "
                  "Firmware writes are ignored"),
            Field("held", 1, R, desc="a descriptor was refused for READY since the last reset or FLR"),
        ]),
        Register(RTS_CTRL, "RTS_CTRL", "RTS request (firmware only)", [
            Field("slot", (RTS_SLOTS - 1).bit_length(), W, desc=f"measurement slot 0..{RTS_SLOTS - 1}"),
            Field("extend", 1, W, offset=8, desc="extend the slot by RTS_DATA0..11, as the RTM on the "
                  "bus (owner id = the fw_id port, not a register); ignored while busy"),
            Field("read", 1, W, desc="read the slot into RTS_DATA0..11, RTS_STATUS, RTS_COUNT; ignored while "
                  "busy (extend wins if both are set)"),
        ]),
        Register(RTS_STATUS, "RTS_STATUS", "RTS status (firmware only)", [
            Field("busy", 1, R, desc="a request is in flight (from the RTS_CTRL write for "
                  "GpuCC.rts_extend_cycles for an extend, rts_read_cycles for a read)"),
            Field("refused", 1, R, desc="the last extend was refused: the slot is bound to another owner"),
            Field("ready", 1, R, desc="the store's cold-reset scrub is done"),
            Field("owner", 8, R, offset=8, desc="owner id of the last slot read"),
            Field("bound", 1, R, desc="the last slot read has an owner"),
        ]),
        Register(RTS_COUNT, "RTS_COUNT", "Extends of the last slot read (firmware only)", [
            Field("count", 32, R, desc="saturating at 2^32 - 1"),
        ]),
        Register(RTS_REFUSED, "RTS_REFUSED", "Extends refused for the owner lock (firmware only)", [
            Field("count", 32, R, desc="since the cold reset, saturating"),
        ]),
        Register(DMA_KEY_CTRL, "DMA_KEY_CTRL", "DMA key install (firmware only)", [
            Field("channel", 4, W, desc="cc_dma channel"),
            Field("go", 1, W, offset=8, desc="install KEY0..7 with DMA_KEY_IV; refused in CC off"),
        ]),
        Register(DMA_KEY_IV, "DMA_KEY_IV", "First IV counter of the next install (firmware only)", [
            Field("iv", 32, RW, desc="both directions"),
        ]),
        Register(DMA_KEY_STATUS, "DMA_KEY_STATUS", "DMA key install status (firmware only)", [
            Field("busy", 1, R, desc="an install waits for the engine"),
            Field("refused", 1, R, desc="a go in CC off, sticky until the next reset"),
            Field("installs", 8, R, offset=8, desc="installs since the last reset or FLR"),
        ]),
    ]
    regs += [Register(RTS_DATA + 4 * k, f"RTS_DATA{k}", f"RTS value, bits {32 * k + 31}..{32 * k} "
                      "(firmware only)", [
        Field("value", 32, RW, desc="written: the next extend's value; read: the last slot read "
              "(byte 4k + j of the 48-byte measurement in bits 8j + 7..8j)")]) for k in range(RTS_WORDS)]
    return RegisterMap("gpu_cc", regs, addr_width=ADDR_WIDTH,
                       desc="gpu_cc's own registers beside cc_ctrl's (hw/cc/regs.py: gpu_register_map).")


def field_values(register, value):
    """``{field name: value}`` of a *register* word as read (every field, by the map)."""
    return {f.name: value >> f.offset & ((1 << f.width) - 1) for f in register.fields}


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
    lines += [""]
    lines.append(gpu_register_map().markdown(heading="###").rstrip("\n"))
    lines += ["", DOC_END]
    return "\n".join(lines)
