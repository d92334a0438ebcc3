"""The SXP register map and exception causes (docs/sxp.md), defined once for the RTL
(:mod:`hw.sxp.core`), the golden model (:mod:`sw.sxp.model`), the CSR driver
(:mod:`sw.sxp.driver`), the testbenches and docs/registers.md.

``python -m scripts.gen_docs`` regenerates docs/registers.md (:func:`doc_text`; and the JSON
form in ``sim_build/reports/sxp_regs.json``) from :func:`register_map`; sw/sxp/test_docs.py and
``python -m scripts.gen_docs --check`` check that the committed file equals what the code
generates.
"""
from pathlib import Path

from amaranth.lib import enum

from hw.csr import Access, Field, Register, RegisterMap
from hw.gcm.layout import MAX_CONTEXTS, check_contexts

from .packet import TILE_BITS

__all__ = ["Cause", "register_map", "XBCTX_ENTRIES", "REGIONS", "REGION_BITS", "KEY_WORDS",
           "ADDR_KXBCTXMAP", "ADDR_KPHYSMAP", "ADDR_KSEL_BASE", "ADDR_KSEL_LIMIT", "ADDR_KEY",
           "ADDR_KEY_COMMIT", "DOC", "doc_text", "CONFIG_REGISTERS", "is_config_register"]

XBCTX_ENTRIES = 16          # exchange-block contexts
REGIONS = 17                # key regions: 0 = cleartext, 1..16 = one per physical context
REGION_BITS = 5             # a KPHYSMAP entry: region id 1..16 (0 = unmapped)
KEY_WORDS = 8               # 256-bit key = 8 staging words

ADDR_KEY = 0x040            # KEY_W0..KEY_W7
ADDR_KEY_COMMIT = 0x060
ADDR_KXBCTXMAP = 0x080      # + 4 * xbctx
ADDR_KPHYSMAP = 0x0C0       # + 4 * phys
ADDR_KSEL_BASE = 0x100      # + 4 * region
ADDR_KSEL_LIMIT = 0x180     # + 4 * region

#: the configuration TrustGate checks; from the trust request on (and in trusted mode) these
#: registers are read-only for both ports, so the configuration in force is the one checked
CONFIG_REGISTERS = ("KXBCTXMAP", "KPHYSMAP", "KSEL_BASE", "KSEL_LIMIT")


def is_config_register(reg):
    """*reg* (a :class:`hw.csr.Register`) is one of the :data:`CONFIG_REGISTERS`."""
    return reg.name.rstrip("0123456789") in CONFIG_REGISTERS


DOC = Path(__file__).resolve().parents[2] / "docs" / "registers.md"

R, W, RW, W1C = Access.R, Access.W, Access.RW, Access.W1C
FROZEN = (". Read-only for both ports from a CTRL.trust request on and in trusted mode: a write is "
          "refused and counts in DENIED")


class Cause(enum.Enum, shape=4):
    """Security-exception causes (``STATUS.cause``)."""
    NONE = 0
    MALFORMED = 1   # bad header: kind not allowed on the port, length not 1..256 (payload) /
                    # 1..1024 (read request) bytes in whole beats of 16·lanes bytes, address
                    # not on a beat boundary, a one-beat packet that would open and close a
                    # frame at once; or a beat count that disagrees with the length
    MAP = 2         # aes request: KXBCTXMAP[xbctx] names no physical context of this SXP,
                    # or KPHYSMAP[phys] is not a region 1..16
    REGION = 3      # aes request: a byte outside KSELLIMIT[KPHYSMAP[KXBCTXMAP[xbctx]]]
    CLEAR = 4       # request without aes: a byte outside KSELLIMIT[0]
    AUTH = 5        # read completion frame: tag mismatch
    FRAME = 6       # the engine refused an op (no key, IV tail not 00000001, frame misuse)
    CONFIG = 7      # trusted mode refused: regions overlap or KPHYSMAP not 1:1


def register_map(contexts=MAX_CONTEXTS):
    """The ``sxp`` register map for an SXP with *contexts* physical key contexts."""
    check_contexts(contexts)
    causes = ", ".join(f"{c.value} {c.name}" for c in Cause)
    regs = [
        Register(0x000, "CTRL", "Control", [
            Field("trust", 1, W, desc="write 1: enter trusted mode if the configuration is "
                  "consistent (regions disjoint, KPHYSMAP 1:1), else exception CONFIG; "
                  "only a reset leaves trusted mode. While the request is checked and in trusted "
                  "mode the host port is locked (its writes change nothing, its reads return "
                  "zero) and the configuration registers are read-only for the CCU port too"),
        ]),
        Register(0x004, "STATUS", "Exception status and mode", [
            Field("exc", 1, W1C, desc="a security exception is latched (drives `irq`); "
                  "write 1 to clear"),
            Field("trusted", 1, R, desc="trusted mode: host writes are refused and host reads "
                  "return zero (the CCU port reads this bit)"),
            Field("key_busy", 1, R, desc="a committed key is on its way into the engine"),
            Field("cause", 4, R, offset=4, desc=f"cause of the latched exception ({causes})"),
        ]),
        Register(0x008, "EXC_ADDR", "Latched exception: tile PCI address", [
            Field("addr", 32, R, desc="`hdr.addr` of the offending packet (0 for CONFIG)"),
        ]),
        Register(0x00C, "EXC_TILE", "Latched exception: tile and packet kind", [
            Field("tile", TILE_BITS, R, desc="`hdr.tile` of the offending packet"),
            Field("kind", 2, R, offset=16, desc="`hdr.kind` of the offending packet"),
        ]),
        Register(0x010, "EXC_COUNT", "Security exceptions since reset", [
            Field("count", 32, R, desc="every exception, latched or not (wrapping)"),
        ]),
        Register(0x014, "DENIED", "Refused accesses since reset", [
            Field("count", 32, R, desc="accesses refused from the trust request on: host-port "
                  "writes and reads of a register, CCU-port writes to a configuration register "
                  "(at most one per port and cycle; wrapping)"),
        ]),
        Register(0x018, "RD_BUSY", "Physical contexts with an aes read outstanding", [
            Field("ctx", contexts, R, desc="bit c: a read on context c awaits its `cc` "
                  "completion"),
        ]),
    ]
    regs += [Register(ADDR_KEY + 4 * k, f"KEY_W{k}", f"Key staging word {k} (write-only)", [
        Field("key", 32, W, desc=f"key bytes {4 * k}..{4 * k + 3} (bus lane order); reads "
              "as zero"),
    ]) for k in range(KEY_WORDS)]
    regs.append(Register(ADDR_KEY_COMMIT, "KEY_COMMIT", "Install the staged key", [
        Field("ctx", 4, W, desc="physical context that receives KEY_W0..7; the staging "
              "words are zeroed. Ignored while STATUS.key_busy"),
    ]))
    regs += [Register(ADDR_KXBCTXMAP + 4 * i, f"KXBCTXMAP{i}",
                      f"Exchange-block context {i} → physical key context", [
        Field("phys", 4, RW, desc="physical key context" + FROZEN),
    ]) for i in range(XBCTX_ENTRIES)]
    regs += [Register(ADDR_KPHYSMAP + 4 * p, f"KPHYSMAP{p}",
                      f"Physical key context {p} → key region", [
        Field("region", REGION_BITS, RW, reset=p + 1,
              desc="key region 1..16 (0: unmapped); reset: the identity map p → p + 1, "
                   "so the reset configuration is consistent (all regions empty)" + FROZEN),
    ]) for p in range(contexts)]
    regs += [Register(ADDR_KSEL_BASE + 4 * r, f"KSEL_BASE{r}",
                      f"Key region {r}: first byte" + (" (cleartext region)" if r == 0 else ""), [
        Field("addr", 32, RW, desc="tile PCI address" + FROZEN),
    ]) for r in range(REGIONS)]
    regs += [Register(ADDR_KSEL_LIMIT + 4 * r, f"KSEL_LIMIT{r}",
                      f"Key region {r}: first byte past the region", [
        Field("addr", 32, RW, desc="tile PCI address; limit <= base: empty region; a request's "
              "end (address + length, no wrap at 2^32) must not exceed it" + FROZEN),
    ]) for r in range(REGIONS)]
    return RegisterMap("sxp", registers=regs, data_width=32,
                       desc=f"Secure Exchange Pipe with {contexts} physical key contexts "
                            "(hw/sxp/regs.py). Two ports: `ccu` (trusted) and `host`.")


DOC_HEAD = """# SXP registers (generated)

Generated by `python -m scripts.gen_docs` from `hw/sxp/regs.py`; do not edit by
hand (`sw/sxp/test_docs.py` checks that this file equals the generated text). Behaviour:
[sxp.md](sxp.md).

"""


def doc_text(contexts=MAX_CONTEXTS):
    """The whole of docs/registers.md."""
    return DOC_HEAD + register_map(contexts).markdown("##")
