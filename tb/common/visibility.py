"""What a testbench can see of a Verilator model: every register, every memory and every
module port — not every net.

cocotb's runner builds with ``--public-flat-rw``: every wire of the design becomes a public
variable, which Verilator may then neither inline nor fold away, and whose symbol table the
model builds at start-up. Measured on ``gcm_core`` (free-running, clock only, ``OPT_FAST=-O1``):
216 k cycles/s with nothing public, 31 k with everything public, about 100 k with only the
state and the ports public; the C++ build took 17 s, 167 s and 41 s.

The testbenches need less than every net. The reset-scrub scans (:mod:`tb.common.scrub`)
look for secrets in *state* — a net is a function of registers and inputs, so a secret on a
net after the scrub would have to sit in a register or come in on a port — and the few
internal probes are ports of submodules (an engine's ``i__ready``, the SXP parking stage's
``release``). So :func:`expose_state` marks exactly those public in the Verilog a build
compiles, and :data:`VISIBILITY_FLAGS` turns the runner's ``--public-flat-rw`` off again.

A register is a target of a non-blocking assignment (Yosys writes every flip-flop as
``name <= …`` in an ``always @(posedge …)`` block); a memory is a ``reg`` declared with an
unpacked dimension (``reg [127:0] mem [255:0];``).
"""
import re

__all__ = ["VISIBILITY_FLAGS", "expose_state"]

# given after the runner's own flags, so it wins over its --public-flat-rw
VISIBILITY_FLAGS = ["--no-public-flat-rw"]

_PUBLIC = " /*verilator public_flat_rw*/"
_ID = r"(\\\S+ |[A-Za-z_][\w$]*)"          # an escaped identifier ends at a space
_NONBLOCKING = re.compile(r"^\s+" + _ID + r"\s*(?:\[[^\]]*\])?\s*<=")
_REG = re.compile(r"^(\s+reg\s+(?:\[[^\]]*\]\s+)?)" + _ID + r"((?:\s*\[[^\]]*\])?)(.*)$")
_PORT = re.compile(r"^(\s+(?:input|output|inout)\s+(?:\[[^\]]*\]\s+)?)" + _ID + r"(.*)$")


def _registers(lines):
    """Line index of each ``module`` -> the names its non-blocking assignments write."""
    modules, current = {}, None
    for i, line in enumerate(lines):
        if line.startswith("module "):
            current = modules[i] = set()
        elif current is not None and (m := _NONBLOCKING.match(line)):
            current.add(m.group(1).strip())
    return modules


def expose_state(verilog):
    """*verilog* (Yosys's output) with every register, memory and port declared
    ``public_flat_rw``; returns ``(text, count of declarations marked)``."""
    lines = verilog.split("\n")
    registers = _registers(lines)
    current, marked = set(), 0
    for i, line in enumerate(lines):
        if i in registers:
            current = registers[i]
        elif (m := _REG.match(line)) and (m.group(3) or m.group(2).strip() in current):
            lines[i] = m.group(1) + m.group(2) + m.group(3) + _PUBLIC + m.group(4)
            marked += 1
        elif m := _PORT.match(line):
            lines[i] = m.group(1) + m.group(2) + _PUBLIC + m.group(3)
            marked += 1
    return "\n".join(lines), marked
