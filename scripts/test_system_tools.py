"""The rule for optional system tools (GTKWave, lcov, Yosys, OpenSSL, Xvfb): ``make test`` passes
on a machine that has none of them. A command or test gets such a tool only through
``tb.common.toolchain.system_tool`` (installs it when running as root, as ``make synth`` installs
yosys) or ``require_tool`` (that, or the test skips with a one-line reason). These tests check the
rule over every test file, the helpers' behaviour, and, end to end, the wave tests on a machine
where the tools look missing."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.verilog import ROOT
from tb.common import toolchain
from tb.common.toolchain import SYSTEM_TOOLS, require_tool, system_tool

HELPERS = {"require_tool", "system_tool"}


def _test_files():
    for folder in ("sw", "scripts", "tb"):
        yield from (p for p in sorted((ROOT / folder).rglob("test_*.py")) if p != Path(__file__).resolve())


def _violations(path):
    """Places in *path* that name a system tool other than as the first argument of
    require_tool()/system_tool() (``shutil.which("gtkwave")`` and ``["gtkwave", …]`` among them)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    allowed = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in HELPERS and node.args:
                allowed.add(id(node.args[0]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in SYSTEM_TOOLS and id(node) not in allowed:
            where = f"{os.path.relpath(path, ROOT)}:{node.lineno}"
            out.append(f"{where}: {node.value!r} named outside require_tool/system_tool")
    return sorted(out)


def test_every_test_gets_its_system_tools_through_the_helpers():
    files = list(_test_files())
    assert len(files) > 50, f"found only {len(files)} test files: the walk is broken"
    problems = [v for path in files for v in _violations(path)]
    assert not problems, "tests that would fail (not skip) without an optional system tool:\n" + "\n".join(problems)


def test_the_rule_check_sees_a_bare_tool(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text('import shutil, subprocess\n'
                   'def test_x():\n'
                   '    subprocess.run(["gtkwave", "x.gtkw"])\n'
                   '    assert shutil.which("fst2vcd")\n')
    good = tmp_path / "test_good.py"
    good.write_text('import subprocess\n'
                    'from tb.common.toolchain import require_tool\n'
                    'def test_x():\n'
                    '    subprocess.run([require_tool("gtkwave", "the view"), "x.gtkw"])\n')
    found = _violations(bad)
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        "'fst2vcd' named outside require_tool/system_tool", "'gtkwave' named outside require_tool/system_tool"], found
    assert _violations(good) == []


def test_a_missing_tool_skips_with_a_one_line_reason(monkeypatch):
    monkeypatch.setenv("HIDE_SYSTEM_TOOLS", "gtkwave")
    monkeypatch.setenv("SYSTEM_INSTALL", "0")
    assert system_tool("gtkwave") is None
    with pytest.raises(pytest.skip.Exception) as skip:
        require_tool("gtkwave", "opening the view")
    reason = str(skip.value)
    assert "\n" not in reason and "Debian package gtkwave" in reason and "opening the view" in reason, reason


def test_install_is_refused_when_forbidden(monkeypatch):
    calls = []
    monkeypatch.setattr(toolchain.subprocess, "run", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    monkeypatch.setenv("SYSTEM_INSTALL", "0")
    monkeypatch.delenv("HIDE_SYSTEM_TOOLS", raising=False)
    assert system_tool("genhtml") is None
    assert calls == [], "apt-get ran although SYSTEM_INSTALL=0"


def test_a_present_tool_is_found_and_an_unknown_one_refused(monkeypatch, tmp_path):
    fake = tmp_path / "vcd2fst"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("HIDE_SYSTEM_TOOLS", raising=False)
    if system_tool("vcd2fst") != str(fake):
        assert Path(system_tool("vcd2fst")).name == "vcd2fst"     # a real one earlier on PATH
    with pytest.raises(ValueError, match="not an optional system tool"):
        system_tool("cc")


def test_wave_tests_pass_without_gtkwave():
    """The wave tests, run as on a machine without GTKWave or Xvfb (the FST headers may still be
    installed, as on a fresh machine run as root): they pass or skip, none fails (the FST view test
    failed there: without fst2vcd the view opens at time 0)."""
    hidden = ",".join(name for name, packages in SYSTEM_TOOLS.items() if {"gtkwave", "xvfb"} & set(packages))
    env = {**os.environ, "HIDE_SYSTEM_TOOLS": hidden, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          "scripts/test_waves.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1800)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"scripts/test_waves.py failed without GTKWave:\n{out[-4000:]}"
    assert "skipped" in out and "Debian package gtkwave" in out, \
        f"nothing skipped for want of GTKWave: were the tools really hidden?\n{out[-3000:]}"
