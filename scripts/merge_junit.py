"""Merge the JUnit XML files of a sharded regression (``make sim SHARD=i/N`` writes
``sim_build/reports/sim-<i>of<N>.xml``) into one file, and print a one-line summary.

``python scripts/merge_junit.py [--shards N] [--out FILE] PATH…`` (``make sim-merge``):
each PATH is a shard file or a folder holding them. N is the shard count in the file names
unless ``--shards`` gives it. Exits 1 when a shard's file is missing or unreadable or a
shard has a failure or an error (the merged file is written all the same, with the shards
there are), 2 on bad arguments.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["shard_files", "merge", "main", "Summary"]

_NAME = re.compile(r"sim-(\d+)of(\d+)\.xml")
COUNTS = ("tests", "failures", "errors", "skipped")


@dataclass
class Summary:
    shards: int                     # N
    found: list = field(default_factory=list)       # shard numbers whose file was read
    missing: list = field(default_factory=list)     # shard numbers without a file
    unreadable: dict = field(default_factory=dict)  # shard number -> why its file could not be read
    failed: list = field(default_factory=list)      # shard numbers with a failure or an error
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    time: float = 0.0

    @property
    def ok(self):
        return not (self.missing or self.unreadable or self.failed)

    def line(self):
        text = (f"{len(self.found)} of {self.shards} shards: {self.tests} tests, {self.failures} failures, "
                f"{self.errors} errors, {self.skipped} skipped")
        problems = ([f"missing shard {i}/{self.shards}" for i in self.missing]
                    + [f"unreadable shard {i}/{self.shards} ({why})" for i, why in self.unreadable.items()]
                    + [f"failing shard {i}/{self.shards}" for i in self.failed])
        return ("FAILED: " if problems else "passed: ") + text + "".join(f"; {p}" for p in problems)


def shard_files(paths, shards=None):
    """``(N, {i: path})`` from shard files and folders of them. *shards* (N) keeps the files
    of an N-way split only; without it every file found must be of one split. ValueError
    when a file is not named ``sim-<i>of<N>.xml`` or no shard file is found."""
    named = []
    for path in map(Path, paths):
        candidates = sorted(path.glob("sim-*of*.xml")) if path.is_dir() else [path]
        for file in candidates:
            m = _NAME.fullmatch(file.name)
            if not m:
                raise ValueError(f"{file}: not a shard file (expected sim-<i>of<N>.xml)")
            named.append((int(m.group(1)), int(m.group(2)), file))
    if shards is not None:
        named = [(i, n, f) for i, n, f in named if n == shards]
    splits = sorted({n for _, n, _ in named})
    if not splits:
        where = ", ".join(map(str, paths))
        raise ValueError(f"no shard files (sim-<i>of{shards or '<N>'}.xml) in {where}")
    if len(splits) > 1:
        raise ValueError(f"shard files of {len(splits)} different splits (N = {', '.join(map(str, splits))}): "
                         f"give --shards N")
    count = splits[0]
    files = {}
    for index, _, file in named:
        if not 1 <= index <= count:
            raise ValueError(f"{file}: shard {index} of {count} does not exist (shards count from 1)")
        if index in files and files[index].resolve() != file.resolve():
            raise ValueError(f"shard {index}/{count} given twice: {files[index]} and {file}")
        files[index] = file
    return count, files


def merge(count, files):
    """``(merged <testsuites> element, Summary)`` of the shard files *files* (``{i: path}``)
    of an N = *count* split."""
    summary = Summary(count)
    root = ET.Element("testsuites", name=f"make sim, {count} shards")
    for index in range(1, count + 1):
        if index not in files or not files[index].exists():
            summary.missing.append(index)
            continue
        try:
            tree = ET.parse(files[index]).getroot()
        except (ET.ParseError, OSError) as e:
            summary.unreadable[index] = str(e)
            continue
        if tree.tag not in ("testsuite", "testsuites"):
            summary.unreadable[index] = f"root element <{tree.tag}>, not <testsuites> or <testsuite>"
            continue
        suites = [tree] if tree.tag == "testsuite" else list(tree.iter("testsuite"))
        summary.found.append(index)
        bad = 0
        for suite in suites:
            counts = {k: int(suite.get(k, 0) or 0) for k in COUNTS}
            summary.tests += counts["tests"]
            summary.failures += counts["failures"]
            summary.errors += counts["errors"]
            summary.skipped += counts["skipped"]
            summary.time += float(suite.get("time", 0) or 0)
            bad += counts["failures"] + counts["errors"]
            suite.set("name", f"{suite.get('name', 'pytest')} shard {index}/{count}")
            root.append(suite)
        if bad:
            summary.failed.append(index)
    for key in COUNTS:
        root.set(key, str(getattr(summary, key)))
    root.set("time", f"{summary.time:.3f}")
    return root, summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="shard files (sim-<i>of<N>.xml) or folders of them")
    parser.add_argument("--shards", type=int, help="N, the number of shards (default: from the file names)")
    parser.add_argument("--out", type=Path, default=Path("sim_build/reports/sim.xml"),
                        help="the merged JUnit file (default %(default)s)")
    args = parser.parse_args(argv)
    if args.shards is not None and args.shards < 1:
        parser.error(f"--shards {args.shards}: the number of shards must be at least 1")
    try:
        count, files = shard_files(args.paths, args.shards)
    except ValueError as e:
        print(f"merge_junit: {e}", file=sys.stderr)
        return 1
    root, summary = merge(count, files)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(args.out, encoding="utf-8", xml_declaration=True)
    print(f"{summary.line()} → {args.out}")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
