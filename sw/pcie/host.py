"""Host side of ``pcie_rdtable``: the completer that answers read requests.

A read of ``length`` bytes at ``addr`` may be answered by one or more completions, in
address order (PCIe Base Specification, "Data Return for Read Requests"): every completion
carries at most ``max_payload`` bytes, and every completion but the last ends on an
address aligned to the read-completion boundary ``rcb``. Here payloads move in 16-byte
granules, so a legal split is a choice of RCB-aligned cut addresses strictly inside the
read with no two consecutive cuts (or the ends) more than ``max_payload`` apart. With beats
of 16 · ``lanes`` bytes, the read's address and length are multiples of the beat (the
table's granule) and the RCB is too, so every completion is a whole number of beats.

- :func:`all_splits` enumerates every legal split, :func:`count_splits` counts them;
- :func:`random_split` draws one: ``"uniform"`` (every legal split equally likely),
  ``"finest"`` (a cut at every RCB) or ``"coarsest"`` (as few completions as possible);
- :func:`is_legal_split` checks a split against the rules above;
- :func:`completion_packets` turns a split into completion packets (lists of
  :class:`~sw.pcie.beats.Beat`), optionally with junk in every header field the table must
  not trust (kind, tile, xbctx, aes, cc, key_index, the later beats' headers, ``first``).
"""
import random as _random
from functools import lru_cache

from hw.pcie.layout import GRANULE, check_params
from hw.sxp.packet import Header, Kind

from .beats import HEADER_FIELDS, Beat, header

__all__ = ["cut_points", "all_splits", "count_splits", "random_split", "is_legal_split",
           "completion_packets"]

_MODES = ("uniform", "finest", "coarsest")
_WIDTHS = {name: (1 << f.width) - 1 for name, f in Header}   # field masks, for junk


def _check_read(addr, length, rcb, max_payload, lanes):
    granule = check_params(rcb=rcb, max_payload=max_payload, lanes=lanes).granule
    if addr % granule or length % granule or length <= 0:
        raise ValueError(f"read addr {addr:#x} length {length}: both multiples of {granule} "
                         f"(16 * lanes), length > 0")


def cut_points(addr, length, rcb):
    """The RCB-aligned addresses strictly inside [addr, addr + length)."""
    first = (addr // rcb + 1) * rcb
    return list(range(first, addr + length, rcb))


def _positions(addr, length, rcb):
    return [addr] + cut_points(addr, length, rcb) + [addr + length]


@lru_cache(maxsize=4096)
def _ways(addr, length, rcb, max_payload):
    """ways[i] = legal splits of the rest of the read from position i."""
    pos = _positions(addr, length, rcb)
    ways = [0] * len(pos)
    ways[-1] = 1
    for i in range(len(pos) - 2, -1, -1):
        ways[i] = sum(ways[j] for j in range(i + 1, len(pos)) if pos[j] - pos[i] <= max_payload)
    return tuple(ways)


def count_splits(addr, length, rcb=64, max_payload=256, lanes=1):
    _check_read(addr, length, rcb, max_payload, lanes)
    return _ways(addr, length, rcb, max_payload)[0]


def all_splits(addr, length, rcb=64, max_payload=256, lanes=1):
    """Every legal split, each a list of (addr, length) completions."""
    _check_read(addr, length, rcb, max_payload, lanes)
    pos = _positions(addr, length, rcb)

    def walk(i):
        if i == len(pos) - 1:
            yield []
            return
        for j in range(i + 1, len(pos)):
            if pos[j] - pos[i] > max_payload:
                break
            for rest in walk(j):
                yield [(pos[i], pos[j] - pos[i])] + rest
    yield from walk(0)


def random_split(addr, length, rcb=64, max_payload=256, rng=_random, mode="uniform", lanes=1):
    """One legal split (list of (addr, length)), drawn as *mode* says."""
    _check_read(addr, length, rcb, max_payload, lanes)
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, not {mode!r}")
    pos = _positions(addr, length, rcb)
    ways = _ways(addr, length, rcb, max_payload)
    i, out = 0, []
    while i < len(pos) - 1:
        options = [j for j in range(i + 1, len(pos)) if pos[j] - pos[i] <= max_payload]
        if mode == "finest":
            j = options[0]
        elif mode == "coarsest":
            j = options[-1]
        else:
            pick = rng.randrange(ways[i])
            for j in options:
                if pick < ways[j]:
                    break
                pick -= ways[j]
        out.append((pos[i], pos[j] - pos[i]))
        i = j
    return out


def is_legal_split(addr, length, split, rcb=64, max_payload=256, lanes=1):
    """True if *split* answers the read [addr, addr + length) legally with beats of
    16 · *lanes* bytes."""
    at = addr
    for n, (a, size) in enumerate(split):
        if a != at or size <= 0 or size % (GRANULE * lanes) or size > max_payload:
            return False
        at += size
        if n < len(split) - 1 and at % rcb:
            return False
    return at == addr + length and bool(split)


def completion_packets(tag, addr, data, split, lanes=1, rng=_random, junk=False):
    """Completion packets for a read at *addr* whose bytes are *data*, cut as *split*.

    Every packet has ``kind`` READ_CPL, *tag*, its ``addr`` and ``length`` and its data in
    beats of 16 · *lanes* bytes (the last one zero-filled when the split is not in whole
    beats, which a legal split at *lanes* always is). With *junk*, every field the
    table must not trust is random: the first beat's kind, tile, xbctx, aes, cc and
    key_index, and the whole header and ``first`` flag of every later beat.
    """
    beat_bytes = GRANULE * lanes
    packets = []
    for a, size in split:
        chunk = data[a - addr:a - addr + size]
        if junk:
            hdr = header(kind=rng.randrange(4), tile=rng.randrange(1 << 11), xbctx=rng.randrange(16),
                         addr=a, length=size, aes=rng.randrange(2), cc=rng.randrange(2),
                         key_index=rng.randrange(16), tag=tag)
        else:
            hdr = header(kind=Kind.READ_CPL, addr=a, length=size, tag=tag)
        beats = []
        for k in range(0, size, beat_bytes):
            word = int.from_bytes(chunk[k:k + beat_bytes].ljust(beat_bytes, b"\0"), "little")
            if k and junk:
                h = {name: rng.getrandbits(64) & _WIDTHS[name] for name in HEADER_FIELDS}
                first = rng.randrange(2)
            else:
                h, first = dict(hdr), int(k == 0)
            beats.append(Beat(word, h, first, int(k + beat_bytes >= size)))
        packets.append(beats)
    return packets

