#!/usr/bin/env python3
"""A compiler launcher for Verilator's ``OBJCACHE`` that compiles Verilator's run-time library
once per clone (its ``sim_build/``) instead of once per model.

Every Verilator model links the same run-time objects (``verilated.o``, ``verilated_vpi.o``,
``verilated_threads.o``, …: the makefile's ``VK_GLOBAL_OBJS``), compiled from
``$VERILATOR_ROOT/include`` with the same flags. The regression builds 17 models, and compiled
them 17 times: ≈ 9 s of CPU each, the larger part of a small model's build. Verilator's
makefile runs every compile as ``$(OBJCACHE) $(CXX) …`` (the hook meant for ccache, which
this machine need not have); :mod:`tb.common.sim` sets ``OBJCACHE`` to this file.

A compile whose source lies in ``$VERILATOR_ROOT/include`` is looked up in
``sim_build/verilator/objcache/`` under a hash of the command line (the output name left
out), the source's bytes, ``verilated_config.h`` (Verilator's version) and the compiler
executable's identity; a miss compiles and stores the object. Every other compile (the
model's own C++, which differs from model to model) runs unchanged. Parallel builds may
compile the same object at once: each stores it through a rename, so a reader never sees
half a file.
"""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["CACHE_DIR", "cache_key", "main"]

CACHE_DIR = Path(__file__).resolve().parents[2] / "sim_build" / "verilator" / "objcache"


def _output(argv):
    """The object file a compile command writes (``-o <file>``), or None."""
    for flag, value in zip(argv, argv[1:]):
        if flag == "-o":
            return value
    return None


def _source(argv):
    sources = [a for a in argv[1:] if a.endswith((".cpp", ".cc", ".c")) and not a.startswith("-")]
    return sources[-1] if len(sources) == 1 else None


def cache_key(argv, root):
    """The cache key of compile command *argv* (compiler first), or None when *argv* does not
    compile one source of Verilator's run-time library under *root* into an object."""
    out, source = _output(argv), _source(argv)
    if out is None or source is None or "-c" not in argv:
        return None
    include = (Path(root) / "include").resolve()
    path = Path(source).resolve()
    if include not in path.parents:
        return None
    compiler = shutil.which(argv[0]) or argv[0]
    stat = os.stat(compiler)
    digest = hashlib.sha256()
    for part in ([a for a in argv if a != out]
                 + [os.path.realpath(compiler), str(stat.st_size), str(stat.st_mtime_ns)]):
        digest.update(part.encode() + b"\0")
    digest.update(path.read_bytes())
    config = include / "verilated_config.h"
    if config.exists():
        digest.update(config.read_bytes())
    return digest.hexdigest()[:32]


def main(argv, cache_dir=None):
    """Run compile command *argv*, from the cache where it may (*cache_dir*, else
    ``$SIM_OBJCACHE_DIR``, else :data:`CACHE_DIR`); returns its exit status."""
    cache_dir = cache_dir or os.environ.get("SIM_OBJCACHE_DIR") or CACHE_DIR
    root = os.environ.get("VERILATOR_ROOT")
    key = cache_key(argv, root) if argv and root else None
    if key is None:
        return subprocess.call(argv)
    out = _output(argv)
    cached = Path(cache_dir) / f"{key}.o"
    if cached.exists():
        shutil.copyfile(cached, out)
        return 0
    status = subprocess.call(argv)
    if status == 0:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{key}.{os.getpid()}.tmp")
        shutil.copyfile(out, partial)
        os.replace(partial, cached)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
