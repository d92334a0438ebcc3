"""Reader for NIST CAVP ``.rsp`` response files as shipped by ``cryptography-vectors``.

A file is a sequence of ``[section]`` headers (``[ENCRYPT]``, ``[Keylen = 256]``, …) and
blank-line separated records of ``NAME = value`` lines. A record that says ``FAIL`` alone
on a line (the GCM decryption files) gets ``FAIL = True``.
"""
from importlib import resources

__all__ = ["open_rsp", "parse_rsp"]


def open_rsp(*path):
    """Return the text of a vector file, e.g. ``open_rsp("ciphers", "AES", "ECB", "ECBVarKey256.rsp")``."""
    root = resources.files("cryptography_vectors")
    return root.joinpath(*path).read_text()


def parse_rsp(text):
    """Yield one ``dict`` per record: its fields (upper-cased names, string values) and
    ``section`` — the merged ``[…]`` headers in force, e.g. ``{"ENCRYPT": True}`` or
    ``{"Keylen": "256", "IVlen": "96", …}``."""
    section, record = {}, {}
    fresh_section = False
    for raw in text.splitlines() + [""]:
        line = raw.strip()
        if line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            if fresh_section is False:
                section = {}
            fresh_section = True
            inner = line[1:-1]
            if "=" in inner:
                name, value = (part.strip() for part in inner.split("=", 1))
                section[name] = value
            else:
                section[inner] = True
            continue
        fresh_section = False
        if not line:
            if record:
                yield {**record, "section": dict(section)}
                record = {}
            continue
        if line == "FAIL":
            record["FAIL"] = True
        elif "=" in line:
            name, value = (part.strip() for part in line.split("=", 1))
            record[name.upper()] = value
