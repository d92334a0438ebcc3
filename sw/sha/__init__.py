"""SHA-384 golden model (FIPS 180-4), bit-exact with ``hw.sha``."""
from .model import BLOCK_BYTES, DIGEST_BYTES, IV, K, blocks, compress, digest, pad, schedule, sha384, trace

__all__ = ["K", "IV", "BLOCK_BYTES", "DIGEST_BYTES", "pad", "blocks", "schedule", "compress", "trace",
           "digest", "sha384"]
