"""``gcm_core`` (hw/gcm): reset scrub of every key-bearing register.

gcm_core's wide registers have no reset: the reset cycle writes zeros into them through
their write ports (context key, nonce, beat index b and b ± 1, X, H, H³ at lanes 4; s0, P,
x_r, pw, O), and its AES flushes itself for ``flush_cycles`` cycles afterwards while ``key``/``i`` are
refused. Property ``reset_scrub``: from an arbitrary state, reset in the first cycle, any
inputs and later resets: ``GcmCore.flush_cycles`` cycles after the reset was last released
every reset-less register of gcm_core and of its AES (found by walking the elaborated
design) is zero — the AES's pipeline registers hold the zero-key public constants
(:func:`formal.aes.aes_scrub_value`).
"""
from hw.gcm import GcmCore

from . import Harness, Property, free_inputs, freeze, rtl_constant, with_mutant
from .aes import aes_scrub_value, scrub_checks

__all__ = ["PROPERTIES", "GCM_ROLES", "gcm_scrub_value"]

GCM_ROLES = {
    "context key": r"(^|\.)ctx\d+_key$",
    "H (hash key)": r"(^|\.)ctx\d+_h$",
    "X (partial hash)": r"(^|\.)ctx\d+_x$",
    "nonce (counter block)": r"(^|\.)ctx\d+_nonce$",
    "beat index (counter)": r"(^|\.)ctx\d+_(beat|beat1|count)$",
    "AES input key (s0)": r"(^|\.)s0_key$",
    "powers of H (read-ahead)": r"(^|\.)pw\d$",
    "E_K(J0) / tag mask, operands (P)": r"(^|\.)p$",
    "AES round keys": r"aes\.s\d+_key$",
    "AES state (E_K of counter blocks)": r"aes\.s\d+_state$",
}


def gcm_scrub_value(path, sig):
    """Zero, except the AES pipeline's zero-key constants."""
    parts = path.split(".")
    if len(parts) >= 2 and parts[-2] == "aes":
        return aes_scrub_value(parts[-1], len(sig))
    return 0


CONTEXTS, LANES = 2, 1


def reset_scrub(mutant=None, contexts=CONTEXTS, lanes=LANES):
    h = Harness()
    dut = GcmCore(contexts, lanes, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    n = rtl_constant(lambda: GcmCore(contexts, lanes), "flush_cycles")
    scrub_checks(h, fragment, n, lambda p, s: s.reset_less, gcm_scrub_value, GCM_ROLES)
    return h


N = rtl_constant(lambda: GcmCore(CONTEXTS, LANES), "flush_cycles")
PROPERTIES = [
    *with_mutant(Property("gcm_core", "reset_scrub", reset_scrub, depth=N + 2, window=True,
                          params={"contexts": CONTEXTS, "lanes": LANES},
                          doc=f"{N} cycles (GcmCore.flush_cycles) after reset every reset-less register "
                              "(context key/H/X/nonce/beat, s0, P, read-ahead, O, AES pipeline) is "
                              "scrubbed"),
                 "keep_h", "the reset does not clear the contexts' H"),
]
