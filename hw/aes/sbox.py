"""The AES S-box as a small logic circuit (Boyar–Peralta, depth 16).

A 256-entry table would synthesise to a large, deep multiplexer tree, and 276 of them sit
in the pipeline (16 per round plus 4 per key-schedule step), so the S-box is built instead
from the circuit of J. Boyar and R. Peralta, "A depth-16 circuit for the AES S-box"
(IACR ePrint 2011/332; SEC 2012): a linear top layer, a shared non-linear middle
(inversion in GF(2^8) through a tower field, 34 AND gates) and a linear bottom layer with
the affine constant 0x63 folded into four XNORs — 128 gates, 16 levels.

The circuit is kept once, as the netlist :data:`CIRCUIT`, and evaluated *bit-sliced*:
each net carries one bit per byte, so SubBytes of a whole state is 128 gates of 16 bits
each and the generated Verilog stays short. Every shared net is a named signal: the
circuit is a DAG with heavy reuse, and Amaranth walks expressions as trees (shape
inference, domain lowering), which takes time exponential in the depth otherwise.

:func:`sbox_table` is a simulation model of the same function, a 256-byte table; a
conversion inside ``sbox_model("table")`` builds it wherever :func:`sbox_layer` is used
(the AES pipeline). docs/aes.md, "S-box models", says who uses which.
"""
import contextlib
import contextvars
import re

from amaranth.hdl import Cat, Signal, Value
from amaranth.lib.memory import Memory

__all__ = ["CIRCUIT", "TABLE", "MODELS", "evaluate", "sbox", "sbox_table", "sbox_layer", "sbox_model",
           "check_model"]

# Inputs U0..U7 and outputs S0..S7 are most significant bit first (U0 = bit 7 of the
# byte). "^" is XOR, "&" AND, "~^" XNOR.
CIRCUIT = """
T1 = U0 ^ U3; T2 = U0 ^ U5; T3 = U0 ^ U6; T4 = U3 ^ U5; T5 = U4 ^ U6; T6 = T1 ^ T5
T7 = U1 ^ U2; T8 = U7 ^ T6; T9 = U7 ^ T7; T10 = T6 ^ T7; T11 = U1 ^ U5; T12 = U2 ^ U5
T13 = T3 ^ T4; T14 = T6 ^ T11; T15 = T5 ^ T11; T16 = T5 ^ T12; T17 = T9 ^ T16; T18 = U3 ^ U7
T19 = T7 ^ T18; T20 = T1 ^ T19; T21 = U6 ^ U7; T22 = T7 ^ T21; T23 = T2 ^ T22; T24 = T2 ^ T10
T25 = T20 ^ T17; T26 = T3 ^ T16; T27 = T1 ^ T12

M1 = T13 & T6; M2 = T23 & T8; M3 = T14 ^ M1; M4 = T19 & U7; M5 = M4 ^ M1; M6 = T3 & T16
M7 = T22 & T9; M8 = T26 ^ M6; M9 = T20 & T17; M10 = M9 ^ M6; M11 = T1 & T15; M12 = T4 & T27
M13 = M12 ^ M11; M14 = T2 & T10; M15 = M14 ^ M11; M16 = M3 ^ M2; M17 = M5 ^ T24; M18 = M8 ^ M7
M19 = M10 ^ M15; M20 = M16 ^ M13; M21 = M17 ^ M15; M22 = M18 ^ M13; M23 = M19 ^ T25
M24 = M22 ^ M23; M25 = M22 & M20; M26 = M21 ^ M25; M27 = M20 ^ M21; M28 = M23 ^ M25
M29 = M28 & M27; M30 = M26 & M24; M31 = M20 & M23; M32 = M27 & M31; M33 = M27 ^ M25
M34 = M21 & M22; M35 = M24 & M34; M36 = M24 ^ M25; M37 = M21 ^ M29; M38 = M32 ^ M33
M39 = M23 ^ M30; M40 = M35 ^ M36; M41 = M38 ^ M40; M42 = M37 ^ M39; M43 = M37 ^ M38
M44 = M39 ^ M40; M45 = M42 ^ M41
M46 = M44 & T6; M47 = M40 & T8; M48 = M39 & U7; M49 = M43 & T16; M50 = M38 & T9
M51 = M37 & T17; M52 = M42 & T15; M53 = M45 & T27; M54 = M41 & T10; M55 = M44 & T13
M56 = M40 & T23; M57 = M39 & T19; M58 = M43 & T3; M59 = M38 & T22; M60 = M37 & T20
M61 = M42 & T1; M62 = M45 & T4; M63 = M41 & T2

L0 = M61 ^ M62; L1 = M50 ^ M56; L2 = M46 ^ M48; L3 = M47 ^ M55; L4 = M54 ^ M58; L5 = M49 ^ M61
L6 = M62 ^ L5; L7 = M46 ^ L3; L8 = M51 ^ M59; L9 = M52 ^ M53; L10 = M53 ^ L4; L11 = M60 ^ L2
L12 = M48 ^ M51; L13 = M50 ^ L0; L14 = M52 ^ M61; L15 = M55 ^ L1; L16 = M56 ^ L0; L17 = M57 ^ L1
L18 = M58 ^ L8; L19 = M63 ^ L4; L20 = L0 ^ L1; L21 = L1 ^ L7; L22 = L3 ^ L12; L23 = L18 ^ L2
L24 = L15 ^ L9; L25 = L6 ^ L10; L26 = L7 ^ L9; L27 = L8 ^ L10; L28 = L11 ^ L14; L29 = L11 ^ L17

S0 = L6 ^ L24; S1 = L16 ~^ L26; S2 = L19 ~^ L28; S3 = L6 ^ L21; S4 = L20 ^ L22; S5 = L25 ^ L29
S6 = L13 ~^ L27; S7 = L6 ~^ L23
"""

# (output, a, operator, b) in evaluation order.
_GATES = tuple(
    re.fullmatch(r"(\w+) = (\w+) (\^|&|~\^) (\w+)", gate.strip()).groups()
    for line in CIRCUIT.strip().splitlines() for gate in line.split(";") if gate.strip()
)


# Gates whose output feeds more than one gate (or leaves the circuit).
_SHARED = frozenset(
    net for net in {out for out, *_ in _GATES}
    if net.startswith("S") or sum((a, b).count(net) for _, a, _, b in _GATES) > 1
)


def evaluate(u, ones=1, net=lambda name, value: value):
    """Run :data:`CIRCUIT` on inputs ``u = [U0, .., U7]``; returns ``[S0, .., S7]``.

    The inputs may be anything with ``^`` and ``&``: Python ints holding one bit, or many
    bits side by side (bit-sliced), or Amaranth values. *ones* is the all-ones value of
    that width (for XNOR); *net* may replace each gate's result, e.g. by a signal.
    """
    nets = {f"U{i}": bit for i, bit in enumerate(u)}
    for out, a, op, b in _GATES:
        a, b = nets[a], nets[b]
        value = a & b if op == "&" else a ^ b ^ ones if op == "~^" else a ^ b
        nets[out] = net(out, value)
    return [nets[f"S{i}"] for i in range(8)]


def _whole_bytes(x):
    x = Value.cast(x)
    if len(x) == 0 or len(x) % 8:
        raise TypeError(f"the S-box takes whole bytes, not {len(x)} bits")
    return x


def sbox(m, x, *, name="sbox"):
    """SubBytes on every byte of *x* (byte *k* in bits ``[8k+7:8k]``), built in module *m*.

    The gates go into ``m.d.comb``; each net read by more than one gate is a signal named
    ``<name>_<net>`` (``<name>_T1`` .. ``<name>_S7``), one bit per byte of *x*. Returns
    the substituted bytes, a value as wide as *x*. (A module is needed, rather than a pure
    expression, for those signals: see the module docstring.)
    """
    x = _whole_bytes(x)
    count = len(x) // 8

    def wire(net, value):
        signal = Signal(len(value), name=f"{name}_{net}")
        m.d.comb += signal.eq(value)
        return signal

    def net(gate, value):
        # A net used once stays inline in its only reader.
        return wire(gate, value) if gate in _SHARED else value

    # Bit plane i holds bit i of every byte; U0 is the most significant plane. The input
    # is a signal too, so that the 8 x count bit selects do not each copy its expression.
    x = wire("in", x)
    planes = [Cat(x[8 * k + i] for k in range(count)) for i in range(8)]
    s = evaluate(planes[::-1], ones=(1 << count) - 1, net=net)
    return Cat(Cat(s[7 - i][k] for i in range(8)) for k in range(count))


def _substitute(byte):
    # the circuit on one byte as Python ints (U0 = bit 7)
    s = evaluate([(byte >> (7 - i)) & 1 for i in range(8)])
    return sum(bit << (7 - i) for i, bit in enumerate(s))


# The circuit's own function, input by input: what the table model (below) looks up. Built
# by the very evaluator that builds the gates, so the two cannot differ;
# scripts/test_sbox_models.py checks it against the FIPS-197 S-box as well.
TABLE = tuple(_substitute(byte) for byte in range(256))


def sbox_table(m, x, *, name="sbox"):
    """SubBytes on every byte of *x* by table: a 256-byte ROM (:data:`TABLE`) named
    ``<name>_rom`` with one combinational read port per byte. The same function as
    :func:`sbox`, for simulation only (see :func:`sbox_layer`)."""
    x = _whole_bytes(x)
    m.submodules[f"{name}_rom"] = rom = Memory(shape=8, depth=256, init=TABLE)
    out = []
    for k in range(len(x) // 8):
        port = rom.read_port(domain="comb")
        m.d.comb += port.addr.eq(x[8 * k:8 * k + 8])
        out.append(port.data)
    return Cat(out)


# The S-box model a conversion builds: "circuit" (the default: what make verilog, make
# synth, make formal and make coverage see) or "table", a simulation model.
MODELS = ("circuit", "table")
_MODEL = contextvars.ContextVar("sbox_model", default="circuit")


def check_model(model):
    """*model* if it is one of :data:`MODELS`, else ValueError."""
    if model not in MODELS:
        raise ValueError(f"the S-box model must be one of {MODELS}, not {model!r}")
    return model


@contextlib.contextmanager
def sbox_model(model):
    """Within the block, :func:`sbox_layer` builds *model* ("circuit" or "table"). Wrap the
    conversion, not the constructor: a component elaborates when it is converted.

    Why a table at all: in Verilator the bit-sliced circuit costs a bit selection per byte,
    plane and reader (Amaranth's netlist has no buffers, so the gathering of bytes into
    planes is repeated in every gate that reads them). It is most of the C++ of the AES
    pipelines, and so of every design built around them; a table is one array read per
    byte. The two are the same function (:data:`TABLE` is evaluated from :data:`CIRCUIT`),
    so a model converted with the table behaves cycle for cycle as the one with the circuit.
    """
    token = _MODEL.set(check_model(model))
    try:
        yield
    finally:
        _MODEL.reset(token)


def sbox_layer(m, x, *, name="sbox"):
    """SubBytes on every byte of *x*, as :func:`sbox` or, inside ``sbox_model("table")``,
    as :func:`sbox_table`."""
    return (sbox_table if _MODEL.get() == "table" else sbox)(m, x, name=name)
