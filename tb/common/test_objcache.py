"""The run-time library cache (tb/common/objcache.py) with a stand-in compiler: what it caches,
what it keys on, and that a failed compile stores nothing; and what a model build's own cache
key (tb.common.sim.toolchain_key) follows."""
import os
import stat
import subprocess
import sys

import pytest

from tb.common import objcache


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A fake VERILATOR_ROOT with one library source, a user source, and a 'compiler' that
    writes `<source bytes> <flags>` to its -o file and counts its runs in runs.txt."""
    root = tmp_path / "verilator"
    (root / "include").mkdir(parents=True)
    (root / "include" / "verilated.cpp").write_text("library")
    (root / "include" / "verilated_config.h").write_text("#define VERILATOR_VERSION 5")
    (tmp_path / "Vtop.cpp").write_text("model")
    cxx = tmp_path / "cxx"
    cxx.write_text(f"""#!{sys.executable}
import sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
if "-DFAIL" in args:
    sys.exit(3)
with open(r"{tmp_path / 'runs.txt'}", "a") as runs:
    runs.write(out + "\\n")
with open(out, "w") as f:
    f.write(open(args[-1]).read() + " " + " ".join(a for a in args if a.startswith("-D")))
""")
    cxx.chmod(cxx.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VERILATOR_ROOT", str(root))
    monkeypatch.chdir(tmp_path)
    return tmp_path, root, str(cxx)


def _runs(tmp):
    path = tmp / "runs.txt"
    return path.read_text().split() if path.exists() else []


def test_library_object_compiled_once(tree):
    tmp, root, cxx = tree
    cache = tmp / "cache"
    src = str(root / "include" / "verilated.cpp")
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    assert objcache.main([cxx, "-Os", "-DVM_TRACE=0", "-c", "-o", "a/verilated.o", src], cache) == 0
    assert objcache.main([cxx, "-Os", "-DVM_TRACE=0", "-c", "-o", "b/verilated.o", src], cache) == 0
    assert "b/verilated.o" not in _runs(tmp), "the second model compiled the library again"
    assert _runs(tmp) == ["a/verilated.o"]
    assert (tmp / "b" / "verilated.o").read_text() == "library -DVM_TRACE=0"
    assert len(list(cache.glob("*.o"))) == 1


def test_other_flags_are_another_object(tree):
    tmp, root, cxx = tree
    cache = tmp / "cache"
    src = str(root / "include" / "verilated.cpp")
    for flag, out in (("-DVM_COVERAGE=0", "plain.o"), ("-DVM_COVERAGE=1", "cov.o")):
        assert objcache.main([cxx, flag, "-c", "-o", out, src], cache) == 0
    assert _runs(tmp) == ["plain.o", "cov.o"]
    assert (tmp / "cov.o").read_text() == "library -DVM_COVERAGE=1"
    # ... and so is the same command after Verilator changed
    (root / "include" / "verilated_config.h").write_text("#define VERILATOR_VERSION 6")
    assert objcache.main([cxx, "-DVM_COVERAGE=0", "-c", "-o", "again.o", src], cache) == 0
    assert _runs(tmp)[-1] == "again.o"


def test_model_sources_are_never_cached(tree):
    tmp, _, cxx = tree
    cache = tmp / "cache"
    for out in ("one.o", "two.o"):
        assert objcache.main([cxx, "-c", "-o", out, str(tmp / "Vtop.cpp")], cache) == 0
    assert _runs(tmp) == ["one.o", "two.o"]
    assert not cache.exists()


def test_failed_compile_stores_nothing(tree):
    tmp, root, cxx = tree
    cache = tmp / "cache"
    src = str(root / "include" / "verilated.cpp")
    assert objcache.main([cxx, "-DFAIL", "-c", "-o", "x.o", src], cache) == 3
    assert not cache.exists() or not list(cache.iterdir())


def test_runs_as_verilators_launcher(tree):
    """make runs it as an executable: `$(OBJCACHE) $(CXX) …`."""
    tmp, root, cxx = tree
    env = {**os.environ, "SIM_OBJCACHE_DIR": str(tmp / "cache")}
    assert os.access(objcache.__file__, os.X_OK), "objcache.py lost its executable bit"
    out = subprocess.run([objcache.__file__, cxx, "-c", "-o", "lib.o",
                          str(root / "include" / "verilated.cpp")], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert (tmp / "lib.o").read_text() == "library "
    assert len(list((tmp / "cache").glob("*.o"))) == 1


def test_model_key_follows_the_toolchain_not_the_clones_place(monkeypatch):
    """A model's cache key names the launcher relative to the clone (``make`` gets its
    absolute path): the clone's place alone does not change it. A model linked against
    another environment's cocotb libraries, or built by another Verilator or cocotb
    release, is built again."""
    from pathlib import Path

    import cocotb_tools.config

    from tb.common import sim

    here = sim.toolchain_key()
    assert "OBJCACHE=tb/common/objcache.py" in here.split()
    moved = Path("/elsewhere/clone")
    monkeypatch.setattr(sim, "ROOT", moved)
    monkeypatch.setattr(sim, "OBJCACHE", moved / "tb" / "common" / "objcache.py")
    assert f"OBJCACHE={moved}/tb/common/objcache.py" in sim.make_overrides()
    assert sim.toolchain_key() == here, "the build key changed with the clone's path"

    monkeypatch.setattr(cocotb_tools.config, "libs_dir", Path("/other/venv/cocotb/libs"))
    assert sim.toolchain_key() != here, "a model linked against another cocotb is reused"
    monkeypatch.undo()

    import importlib.metadata
    real = importlib.metadata.version
    for package in ("verilator", "cocotb"):
        monkeypatch.setattr(importlib.metadata, "version",
                            lambda name, p=package: "0.0" if name == p else real(name))
        assert sim.toolchain_key() != here, f"a model built by another {package} release is reused"
