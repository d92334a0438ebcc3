"""``make waves TEST=<test>``: rerun one test with tracing and open GTKWave on a generated
view that groups the design's stream ports and decodes every payload field (enum fields by
name). Without a display it prints the paths of the trace and of the view.

The view opens on the first transfer: the first rising clock edge after the end of the
first reset at which a stream port has ``valid`` and ``ready`` high (the primary marker sits
on it, the window starts two clock cycles before), or on the end of the reset when nothing
was transferred. Reading an FST trace for that needs GTKWave's ``fst2vcd``; without it the
view opens at time 0.

TEST is a cocotb test name (e.g. ``random_stream``) or a pytest test (``test_aes256``).
``WAVE_FORMAT=vcd`` asks for a VCD trace instead of FST.
"""
import argparse
import enum
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amaranth.hdl import Shape  # noqa: E402
from amaranth.lib import data, wiring  # noqa: E402

from hw.designs import DESIGNS, elaborate  # noqa: E402
from tb.common.toolchain import gtkwave_safe_vcd, have_display, system_tool, wave_format  # noqa: E402

__all__ = ["find_test", "write_view", "handshakes", "vcd_lines", "first_transfer", "Activity", "view_window"]

WAVES = ROOT / "sim_build" / "waves"
F_HEX, F_BIN, F_DEC, F_RJUST, F_TRANSLATED = 0x2, 0x8, 0x4, 0x20, 0x2000
GROUP_BEGIN, GROUP_END, BLANK = 0x800000, 0x1000000, 0x200


def find_test(test):
    """(pytest file, pytest function, cocotb test or None) for a test name."""
    for path in sorted((ROOT / "tb").glob("*/test_*.py")):
        text = path.read_text()
        pytest_fns = re.findall(r"^def (test_\w+)\(", text, re.M)
        if test in pytest_fns:
            return path, test, None
        if re.search(rf"^async def {re.escape(test)}\(", text, re.M) and pytest_fns:
            return path, pytest_fns[0], test
    sys.exit(f"no test named {test!r} in tb/*/test_*.py")


def design_of(path):
    m = re.search(r'run\(\s*"(\w+)"', path.read_text())
    if not m or m.group(1) not in DESIGNS:
        sys.exit(f"cannot tell which design {path} simulates")
    return m.group(1)


def _fields(shape, prefix=""):
    """(name, offset, width, enum or None) of every leaf field of a payload shape."""
    if isinstance(shape, data.Layout):
        for name, field in shape:
            for sub, off, width, en in _fields(field.shape, f"{prefix}{name}."):
                yield sub, field.offset + off, width, en
    else:
        is_enum = isinstance(shape, type) and issubclass(shape, enum.Enum)
        yield prefix.rstrip("."), 0, Shape.cast(shape).width, shape if is_enum else None


def handshakes(component):
    """``{port: [signals, …]}``: what makes a transfer on each of *component*'s ports, a
    transfer being a rising clock edge with every signal of one of the tuples high: ``valid``
    and ``ready`` of a ``lib.stream`` port, ``r_stb`` or ``w_stb`` of a ``hw.csr`` bus."""
    found = {}
    for port, member in component.signature.members.items():
        if not member.is_signature:
            continue
        names = set(member.signature.members)
        if {"valid", "ready", "payload"} <= names:
            found[port] = [(f"{port}__valid", f"{port}__ready")]
        elif {"r_stb", "w_stb"} <= names:
            found[port] = [(f"{port}__r_stb",), (f"{port}__w_stb",)]
    return found


@dataclass
class Activity:
    """What :func:`first_transfer` found in a trace, in the trace's time units."""
    reset_end: int | None = None    # the time rst fell after its first rise
    transfer: int | None = None     # the first rising clk edge after that with valid & ready high
    port: str | None = None         # ... on this stream port
    period: int | None = None       # the clock period (between the first two rising edges)
    signals: dict = field(default_factory=dict)     # name -> its range ("[7:0]" or "") in the scope


@contextmanager
def vcd_lines(trace):
    """The lines of the trace file *trace* as VCD text: the file itself, or for an FST the
    output of GTKWave's ``fst2vcd`` (None without it), read as far as the caller reads."""
    trace = Path(trace)
    if trace.suffix != ".fst":
        with open(trace, errors="replace") as f:
            yield f
        return
    tool = system_tool("fst2vcd", "finding the first transfer in an FST trace")
    if tool is None:
        yield None
        return
    proc = subprocess.Popen([tool, str(trace)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, errors="replace")
    try:
        yield proc.stdout
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


_TIMESCALE = re.compile(r"\$timescale\s+(\d+)\s*[munpf]?s\s+\$end")


def first_transfer(lines, scope, ports, max_lines=20_000_000):
    """Scan VCD text (*lines*) for the end of the first reset and the first transfer after
    it: a rising edge of ``<scope>.clk`` before which ``rst`` was low and every signal of
    one tuple of ``ports[port]`` (:func:`handshakes`) was high. Times are in GTKWave's units
    (the dump's ticks times the timescale's 1/10/100). Without any reset in the first
    *max_lines* lines, the first transfer at all counts."""
    want = {"clk", "rst"} | {n for alternatives in ports.values() for signals in alternatives for n in signals}
    names, path, header = {}, [], []
    scale, t, changes, now = 1, 0, {}, {}
    found, first_any, edges, saw_reset = Activity(), None, [], False

    def settle(t, changes):
        nonlocal first_any, saw_reset
        ids = names
        old = {n: now.get(i) for n, i in ids.items()}
        new = {n: changes.get(i, old[n]) for n, i in ids.items()}
        if new.get("rst") == "1":
            saw_reset = True
        if old.get("rst") == "1" and new.get("rst") == "0" and found.reset_end is None:
            found.reset_end = t
        if old.get("clk") == "0" and new.get("clk") == "1":
            if len(edges) < 2:
                edges.append(t)
            if old.get("rst") != "1":
                p = next((p for p, alternatives in ports.items()
                          if any(all(old.get(n) == "1" for n in signals) for signals in alternatives)), None)
                if p is not None and found.reset_end is not None:
                    found.transfer, found.port = t, p
                elif p is not None and first_any is None:
                    first_any = (t, p)
        now.update(changes)

    it = iter(lines)
    for line in it:                                     # the header
        words = line.split()
        header.append(line)
        if not words:
            continue
        if words[0] == "$scope" and len(words) >= 3:
            path.append(words[2])
        elif words[0] == "$upscope":
            path.pop()
        elif words[0] == "$var" and len(words) >= 5 and path == [scope]:
            found.signals[words[4]] = words[5] if len(words) > 6 and words[5].startswith("[") else ""
            if words[4] in want:
                names[words[4]] = words[3]
        elif words[0] == "$enddefinitions":
            break
    m = _TIMESCALE.search(" ".join(header))
    scale = int(m.group(1)) if m else 1
    if "clk" not in names:
        return found
    watched = set(names.values())
    for count, line in enumerate(it):
        if count >= max_lines or found.transfer is not None:
            break
        line = line.strip()
        if not line:
            continue
        head = line[0]
        if head == "#":
            settle(t, changes)
            t, changes = int(line[1:]) * scale, {}
        elif head in "01xzXZ":
            if line[1:] in watched:
                changes[line[1:]] = head.lower()
        elif head in "bB":
            value, _, ident = line[1:].partition(" ")
            if ident in watched:
                changes[ident] = value[-1:].lower()
    if found.transfer is None:
        settle(t, changes)
    if found.transfer is None and not saw_reset and first_any:
        found.transfer, found.port = first_any
    if len(edges) == 2:
        found.period = edges[1] - edges[0]
    return found


def view_window(activity, cycles_before=2):
    """``(start, marker)`` of the view: the marker on the first transfer, the window starting
    *cycles_before* clock cycles before it but not before the end of the reset; without a
    transfer both at the end of the reset; ``(0, -1)`` (no marker) when the trace showed
    neither."""
    if activity.transfer is None:
        return (0, -1) if activity.reset_end is None else (activity.reset_end, activity.reset_end)
    start = activity.transfer - cycles_before * (activity.period or 0)
    return max(start, activity.reset_end or 0, 0), activity.transfer


def write_view(design, trace, view, scope, start=0, marker=-1, component=None, signals=None):
    """Write a GTKWave save file for *design*'s ports into *view*: the window starting at
    time *start*, the primary marker at *marker* (-1: none). *signals* (``{name: range}``
    of the trace's *scope*, :attr:`Activity.signals`) gives the vectors' ranges as traced,
    which differ from the registered design's where the test built it with other
    parameters; without it they come from *component*."""
    component = component or elaborate(design)
    signals = signals or {}
    lines = [f'[dumpfile] "{trace}"', f'[savefile] "{view}"', f"[timestart] {start}", "[size] 1600 900",
             f"*-17.000000 {marker}",  # zoom (about 40 clock cycles across the window), marker
             "[sst_width] 260", "[signals_width] 320"]

    def sig(name, width=1):
        # GTKWave names a vector with its range: "scope.name[W-1:0]"
        return f"{scope}.{name}" + signals.get(name, f"[{width - 1}:0]" if width > 1 else "")

    def plain(name, shape):
        width = Shape.cast(shape).width
        return [f"@{(F_BIN if width == 1 else F_HEX) | F_RJUST:x}", sig(name, width)]

    lines += [f"@{F_BIN | F_RJUST:x}", sig("clk"), sig("rst")]
    filters = view.parent / "filters"
    filters.mkdir(parents=True, exist_ok=True)
    for port, member in component.signature.members.items():
        if not member.is_signature:
            lines += plain(port, member.shape)
            continue
        sig_obj = member.signature
        lines += [f"@{GROUP_BEGIN | BLANK:x}", f"-{port} ({'in' if member.flow == wiring.In else 'out'})"]
        members = sig_obj.members
        if not {"valid", "ready", "payload"} <= set(members):  # another interface, as a hw.csr bus
            for path, leaf in members.flatten():
                if leaf.is_port:
                    lines += plain("__".join((port, *map(str, path))), leaf.shape)
        else:  # a lib.stream port
            lines += [f"@{F_BIN | F_RJUST:x}", sig(f"{port}__valid"), sig(f"{port}__ready")]
            payload = members["payload"].shape
            fields = list(_fields(payload)) if isinstance(payload, data.Layout) else []
            total = Shape.cast(payload).width
            traced = signals.get(f"{port}__payload")
            if fields and traced is not None and traced != f"[{total - 1}:0]":
                print(f"[waves] {port}: the trace's payload is {traced or '1 bit'}, the registered {design}'s "
                      f"[{total - 1}:0] (the test built it with other parameters): its fields are not decoded",
                      file=sys.stderr)
                fields = []
            for name, offset, width, en in fields:
                # GTKWave addresses bit b of a vector [W-1:0] as "(W-1-b)name[W-1:0]"
                vec = sig(f"{port}__payload[{total - 1}:0]")
                bits = " ".join(f"({total - 1 - (offset + b)}){vec}" for b in reversed(range(width)))
                label = f"{port}.{name}[{width - 1}:0]"
                if en is not None:
                    flt = filters / f"{en.__name__}.txt"
                    flt.write_text("".join(f"{m.value} {m.name}\n" for m in en))
                    lines += [f"^1 {flt}", f"@{F_TRANSLATED | F_DEC | F_RJUST:x}"]
                else:
                    lines += [f"@{(F_BIN if width == 1 else F_HEX) | F_RJUST:x}"]
                lines.append(f"#{{{label}}} {bits}")
            if not fields:
                lines += plain(f"{port}__payload", payload)
        lines += [f"@{GROUP_END | BLANK:x}", f"-{port}"]
    view.write_text("\n".join(lines) + "\n")
    return view


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("test")
    parser.add_argument("--no-run", action="store_true", help="only write the view of an existing trace")
    args = parser.parse_args()
    path, pytest_fn, cocotb_test = find_test(args.test)
    design = design_of(path)
    fmt = wave_format()
    trace = WAVES / f"{args.test}.{fmt}"
    view = WAVES / f"{args.test}.gtkw"
    if not args.no_run:
        env = {**os.environ, "WAVES": "1", "WAVE_FILE": str(trace)}
        if cocotb_test:
            env["TESTCASE"] = cocotb_test
        node = f"{path.relative_to(ROOT)}::{pytest_fn}"
        nodes = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", node],
                               cwd=ROOT, env=env, capture_output=True, text=True).stdout.split()
        node = next((n for n in nodes if "::" in n), node)  # first parameter set
        print(f"[waves] running {node}" + (f" (cocotb test {cocotb_test})" if cocotb_test else ""))
        rc = subprocess.run([sys.executable, "-m", "pytest", "-q", node], cwd=ROOT, env=env).returncode
        if rc:
            print(f"[waves] the test failed (exit {rc}); the trace shows the failure", file=sys.stderr)
    if not trace.exists():
        sys.exit(f"no trace at {trace}")
    if trace.suffix == ".vcd":
        gtkwave_safe_vcd(trace)             # a trace of an older run (--no-run) may predate the renaming
    component = elaborate(design)
    with vcd_lines(trace) as lines:
        activity = first_transfer(lines, design, handshakes(component)) if lines else None
    if activity is None:
        print("[waves] fst2vcd (Debian: gtkwave) not found: the view opens at time 0, not on the first transfer",
              file=sys.stderr)
        activity = Activity()
    start, marker = view_window(activity)
    write_view(design, trace, view, design, start, marker, component, activity.signals)
    if activity.transfer is not None:
        print(f"[waves] the view opens on the first transfer: port {activity.port} at t = {marker} in the trace's "
              f"time units (the marker)")
    elif marker >= 0:
        print(f"[waves] no transfer in the trace: the view opens at the end of the reset, t = {marker}")
    if not os.environ.get("CI") and have_display():
        subprocess.Popen(["gtkwave", str(view)])
        print(f"[waves] GTKWave opened {view}")
    else:
        print(f"trace: {trace}\nview:  {view}\n(no display: open with `gtkwave {view}`)")


if __name__ == "__main__":
    main()
