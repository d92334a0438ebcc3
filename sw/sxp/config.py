"""SXP configurations (KXBCTXMAP, KPHYSMAP, KSELLIMIT) for tests and benchmarks: random legal
ones, and the calls that program one through :class:`sw.ccu.sxp_port.SxpKeyPort`."""
from dataclasses import dataclass

from hw.sxp.packet import BEAT_BYTES
from hw.sxp.regs import REGIONS, XBCTX_ENTRIES
from sw.ccu.sxp_port import SxpRegister

__all__ = ["Config", "random_config", "program"]


@dataclass
class Config:
    kx: list        # 16 entries: xbctx -> phys
    kp: list        # contexts entries: phys -> region 1..16
    regions: list   # 17 (base, limit)

    def region_of_phys(self, phys):
        return self.regions[self.kp[phys]]

    def xbctx_of(self, phys):
        return [i for i, p in enumerate(self.kx) if p == phys]


def random_config(rng, contexts=16, *, min_size=4096, align=BEAT_BYTES, mapped=None, top=False):
    """A legal configuration: 17 disjoint non-empty regions of at least *min_size* bytes at
    random places (bases and limits multiples of *align*), KPHYSMAP a random 1:1 map onto
    regions 1..16, KXBCTXMAP sending each exchange-block context to a random physical one
    (every physical context gets at least one when there are enough; *mapped* restricts
    the targets). *top*: the highest region ends at the top of the address space, limit
    2**32 - *align* (the largest aligned 32-bit limit), so that a request one beat past it
    ends at 2**32."""
    while True:
        cuts = sorted(rng.sample(range(1, (1 << 32) // align), 2 * REGIONS))
        if top:
            cuts[-1] = (1 << 32) // align - 1
        spans = [(cuts[2 * k] * align, cuts[2 * k + 1] * align) for k in range(REGIONS)]
        if all(lim - b >= min_size for b, lim in spans):
            break
    rng.shuffle(spans)
    kp = rng.sample(range(1, REGIONS), contexts)
    targets = list(mapped if mapped is not None else range(contexts))
    kx = [rng.choice(targets) for _ in range(XBCTX_ENTRIES)]
    for _i, p in enumerate(targets[:XBCTX_ENTRIES]):   # each target reachable
        kx[rng.randrange(XBCTX_ENTRIES)] = p
    if len(set(kx)) < min(len(targets), XBCTX_ENTRIES):
        perm = rng.sample(range(XBCTX_ENTRIES), XBCTX_ENTRIES)
        for k, p in enumerate(targets[:XBCTX_ENTRIES]):
            kx[perm[k]] = p
    return Config(kx, kp, spans)


def program(port, cfg):
    """Write *cfg* through an :class:`SxpKeyPort` (``write_config`` calls)."""
    for i, p in enumerate(cfg.kx):
        port.write_config(SxpRegister.KXBCTXMAP, i, p)
    for p, r in enumerate(cfg.kp):
        port.write_config(SxpRegister.KPHYSMAP, p, r)
    for r, (b, lim) in enumerate(cfg.regions):
        port.write_config(SxpRegister.KSELLIMIT_BASE, r, b)
        port.write_config(SxpRegister.KSELLIMIT_LIMIT, r, lim)
