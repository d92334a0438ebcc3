"""``make waves TEST=<test>``: rerun one test with tracing and open GTKWave on a generated
view that groups the design's stream ports and decodes every payload field (enum fields by
name). Without a display it prints the paths of the trace and of the view.

TEST is a cocotb test name (e.g. ``random_stream``) or a pytest test (``test_aes256``).
"""
import argparse
import enum
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amaranth.hdl import Shape  # noqa: E402
from amaranth.lib import data, wiring  # noqa: E402

from hw.designs import DESIGNS, elaborate  # noqa: E402
from tb.common.toolchain import have_display, wave_format  # noqa: E402

__all__ = ["find_test", "write_view"]

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


def write_view(design, trace, view, scope):
    """Write a GTKWave save file for *design*'s ports into *view*."""
    component = elaborate(design)
    lines = [f'[dumpfile] "{trace}"', f'[savefile] "{view}"', "[timestart] 0", "[size] 1600 900",
             "*-17.000000 0",  # zoom: about 40 clock cycles across the window
             "[sst_width] 260", "[signals_width] 320"]

    def sig(name):
        return f"{scope}.{name}"

    lines += [f"@{F_BIN | F_RJUST:x}", sig("clk"), sig("rst")]
    filters = view.parent / "filters"
    filters.mkdir(parents=True, exist_ok=True)
    for port, member in component.signature.members.items():
        if not member.is_signature:
            lines += [f"@{F_HEX | F_RJUST:x}", sig(port)]
            continue
        sig_obj = member.signature
        lines += [f"@{GROUP_BEGIN | BLANK:x}", f"-{port} ({'in' if member.flow == wiring.In else 'out'})"]
        members = sig_obj.members
        if {"valid", "ready", "payload"} <= set(members):  # a lib.stream port
            lines += [f"@{F_BIN | F_RJUST:x}", sig(f"{port}__valid"), sig(f"{port}__ready")]
            payload = members["payload"].shape
            fields = list(_fields(payload)) if isinstance(payload, data.Layout) else []
            for name, offset, width, en in fields:
                # GTKWave addresses bit b of a vector [W-1:0] as "(W-1-b)name[W-1:0]"
                total = Shape.cast(payload).width
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
                lines += [f"@{F_HEX | F_RJUST:x}", sig(f"{port}__payload")]
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
    write_view(design, trace, view, design)
    if have_display() and not os.environ.get("CI"):
        subprocess.Popen(["gtkwave", str(view)])
        print(f"[waves] GTKWave opened {view}")
    else:
        print(f"trace: {trace}\nview:  {view}\n(no display: open with `gtkwave {view}`)")


if __name__ == "__main__":
    main()
