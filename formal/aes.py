"""``aes256`` (hw/aes): the post-reset flush scrubs every pipeline register.

The AES's wide registers have no reset: after reset the input is refused for
``AES256.flush_cycles`` cycles while all-zero bubbles flush the pipeline (docs/aes.md,
"Reset scrub"). So the scrub value of a stage is not zero but the public intermediate of
encrypting the zero block under the zero key: :func:`zero_key_pipeline` computes those
values from the golden model's key expansion and round functions (``sw.aes.model``,
written from FIPS-197 and checked against OpenSSL), independently of the RTL.

Property ``reset_scrub``: from an arbitrary state, reset in the first cycle, any inputs and
any later resets: ``flush_cycles`` cycles after the reset was last released, every
reset-less register of the pipeline (found by walking the elaborated design: the key
window, the state and the sideband of each stage) holds its scrub value.
"""
import re

from amaranth.hdl import Const

from hw.aes import AES256
from sw.aes.model import ROUNDS, SBOX, _mix_column, expand_key

from . import Harness, Property, free_inputs, freeze, registers, rtl_constant, with_mutant

__all__ = ["PROPERTIES", "zero_key_pipeline", "aes_scrub_value", "scrub_checks"]


def zero_key_pipeline():
    """``(keys, states)``: for stage r = 1..ROUNDS-1 the key register after the flush
    (``keys[r-1]``: the 256-bit window w[4r .. 4r+7] of the zero key's schedule, the last
    stage only its upper half, the last round key) and for r = 1..ROUNDS the state after
    round r of encrypting the zero block (``states[r-1]``), as bus-lane integers."""
    rk = expand_key(bytes(32))
    w = b"".join(rk)                                       # the 60 schedule words

    def words(first, count):
        return int.from_bytes(w[4 * first:4 * (first + count)], "little")
    keys = [words(4 * r, 8) if r < ROUNDS - 1 else words(4 * r + 4, 4) for r in range(1, ROUNDS)]
    state, states = [b ^ k for b, k in zip(bytes(16), rk[0])], []
    for rnd in range(1, ROUNDS + 1):
        state = [SBOX[b] for b in state]
        state = [state[4 * ((c + r) % 4) + r] for c in range(4) for r in range(4)]
        if rnd != ROUNDS:
            state = sum((_mix_column(state[4 * c:4 * c + 4]) for c in range(4)), [])
        state = [b ^ k for b, k in zip(state, rk[rnd])]
        states.append(int.from_bytes(bytes(state), "little"))
    return keys, states


_KEYS, _STATES = zero_key_pipeline()


def aes_scrub_value(name, width):
    """The value register *name* of an AES256 pipeline holds after the flush: the zero-key
    constants for ``s<r>_key`` / ``s<r>_state`` (the state replicated per lane), zero for
    the sideband ``s<r>_meta``."""
    if match := re.fullmatch(r"s(\d+)_key", name):
        return _KEYS[int(match[1]) - 1]
    if match := re.fullmatch(r"s(\d+)_state", name):
        lanes = width // 128
        return sum(_STATES[int(match[1]) - 1] << (128 * k) for k in range(lanes))
    return 0


def scrub_checks(h, fragment, n, covered, expected, roles):
    """Check, in the cycle ``n`` cycles after the reset was last released, that every
    register of *fragment* for which ``covered(path, signal)`` holds has the value
    ``expected(path, signal)``. *roles* maps a role ("context key", …) to a regular
    expression over register paths: each role must match at least one covered register
    (so that the walk cannot silently find nothing). Returns the covered ``[(path, signal)]``."""
    regs = [(p, s) for p, s in registers(fragment) if covered(p, s)]
    if not regs:
        raise RuntimeError("the walk found no register to check")
    for role, pattern in roles.items():
        if not any(re.search(pattern, p) for p, _ in regs):
            raise RuntimeError(f"no covered register plays the role {role!r} ({pattern})")
    at = h.since(n + 1) == n
    h.notes.append(f"checked {n} cycles after the reset is released (cycle `since_reset` == {n}):")
    for path, sig in regs:
        value = expected(path, sig)
        roles_of = [r for r, pat in roles.items() if re.search(pat, path)]
        h.notes.append(f"  {path:40s} {len(sig):4d} bits  == {value:#x}"
                       + (f"   [{', '.join(roles_of)}]" if roles_of else ""))
        h.check(path.replace(".", "__"), sig == Const(value, len(sig)), guard=at)
    return regs


AES_ROLES = {
    "key (stage-1 window: the key itself)": r"(^|\.)s1_key$",
    "round keys (key windows of stages 2..13)": r"(^|\.)s(1[0-3]|[2-9])_key$",
    "state (round outputs, E_K of the last block in stage 14)": r"(^|\.)s\d+_state$",
}


def reset_scrub(mutant=None):
    h = Harness()
    dut = AES256(_formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    n = rtl_constant(AES256, "flush_cycles")    # the RTL's flush (the mutant's is shorter)
    scrub_checks(h, fragment, n, lambda p, s: s.reset_less,
                 lambda p, s: aes_scrub_value(p.rsplit(".", 1)[-1], len(s)), AES_ROLES)
    return h


N = rtl_constant(AES256, "flush_cycles")
PROPERTIES = [
    *with_mutant(Property("aes256", "reset_scrub", reset_scrub, depth=N + 2, window=True,
                          params={"lanes": 1},
                          doc=f"{N} cycles (AES256.flush_cycles) after reset every reset-less pipeline "
                              "register holds the zero-key public constant"),
                 "short_scrub", "the flush one cycle short: the last stage keeps a pre-reset value"),
]
