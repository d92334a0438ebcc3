"""Host side of the ``cc_dma`` bounce buffer (the untrusted-memory half of the driver that
runs in the confidential VM): seals frames for the device and opens the device's frames
with OpenSSL through ``cryptography``'s AESGCM.

Frame = IV block (16 bytes, :data:`hw.cc.layout.iv_layout`: counter, direction, channel,
zeros, ``00 00 00 01``) ‖ ciphertext ‖ 16-byte tag. The GCM nonce is the IV block's first
12 bytes; AAD is empty.
"""
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.cc.layout import CTR_LIMIT, IV_TAIL, Dir, iv_layout
from sw.common.payload import pack, unpack

__all__ = ["pack", "unpack", "iv_block", "parse_iv", "HostChannel", "FrameError", "blocks", "join_blocks"]


class FrameError(ValueError):
    """A device frame that the host refuses (bad IV, replay, tag mismatch)."""


_DIR = {Dir.OUT: 0, Dir.IN: 1, 0: 0, 1: 1}     # (calling the enum costs microseconds)


def iv_block(ctr, direction, ch):
    """The 16-byte IV block of a frame."""
    return pack(iv_layout, ctr=ctr, dir=_DIR[direction], ch=ch, tail=IV_TAIL).to_bytes(16, "little")


def parse_iv(block):
    """``{ctr, dir, ch, zero, tail}`` of a 16-byte IV block."""
    return unpack(iv_layout, int.from_bytes(block, "little"))


def blocks(data):
    """16-byte blocks of *data* as bus-lane integers."""
    return [int.from_bytes(data[i:i + 16], "little") for i in range(0, len(data), 16)]


def join_blocks(ints):
    return b"".join(b.to_bytes(16, "little") for b in ints)


class HostChannel:
    """One channel's key as the host holds it: :meth:`seal` frames host → device with its
    own counter, :meth:`open` frames device → host, refusing a counter that does not grow."""

    def __init__(self, key, ch, iv=0):
        if len(key) != 32:
            raise ValueError("AES-256 key: 32 bytes")
        self.key, self.ch = bytes(key), ch
        self._aead = AESGCM(self.key)
        self.tx = iv                 # next counter for host → device frames
        self.rx = iv                 # lowest acceptable counter of device → host frames

    def seal(self, plaintext, ctr=None):
        """The frame for *plaintext* (a non-empty multiple of 16 bytes)."""
        if not plaintext or len(plaintext) % 16:
            raise ValueError("plaintext must be a non-empty multiple of 16 bytes")
        if ctr is None:
            ctr, self.tx = self.tx, self.tx + 1
        if ctr >= CTR_LIMIT:
            raise ValueError("IV counter exhausted: install a new key")
        iv = iv_block(ctr, Dir.IN, self.ch)
        return iv + self._aead.encrypt(iv[:12], plaintext, None)

    def open(self, frame):
        """The plaintext of a device → host frame; FrameError if it is not acceptable."""
        if len(frame) < 48 or len(frame) % 16:
            raise FrameError(f"frame of {len(frame)} bytes")
        iv = parse_iv(frame[:16])
        if (iv["dir"], iv["ch"], iv["zero"], iv["tail"]) != (Dir.OUT.value, self.ch, 0, IV_TAIL):
            raise FrameError(f"IV block not of channel {self.ch} device → host: {iv}")
        if iv["ctr"] < self.rx:
            raise FrameError(f"replayed counter {iv['ctr']} < {self.rx}")
        try:
            pt = self._aead.decrypt(frame[:12], frame[16:], None)
        except Exception as e:                   # cryptography's InvalidTag
            raise FrameError("tag mismatch") from e
        self.rx = iv["ctr"] + 1
        return pt
