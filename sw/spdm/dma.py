"""What the GPU firmware would write into ``gpu_cc`` to hand a session's keys to
``cc_dma`` (docs/cc.md, "DMA key block"; not wired to the RTL by this package).

``cc_dma`` keeps one AES-256 key per channel for both directions and builds each frame's
GCM nonce itself (counter ‖ direction ‖ channel ‖ zero, docs/cc.md "Frames"). So the
firmware gives the two SPDM directions two channels: the *request* direction (CVM →
GPU, the host's IN frames) and the *response* direction (GPU → CVM, OUT frames). The
12-byte SPDM IVs have no place in ``cc_dma``'s key port (its IV field is the 32-bit first
counter); uniqueness of nonces under each key comes from ``cc_dma``'s counters.

Write order of one install on the firmware port: KEY0..KEY7 (KEYk = key bytes 4k..4k+3
as a little-endian word, the layout ``tb/cc/env.py`` writes), DMA_KEY_IV, DMA_KEY_CTRL
with go | channel, then (after DMA_KEY_STATUS.busy clears) zero to KEY0..KEY7.
"""
from hw.cc.regs import DMA_KEY_CTRL, DMA_KEY_GO, DMA_KEY_IV, register_map

from .keys import SessionKeys

__all__ = ["KEY0", "key_install_writes", "session_key_writes"]

KEY0 = register_map()["KEY0"].addr      # KEY0..KEY7 at KEY0 + 4k


def key_install_writes(key: bytes, channel: int, first_counter: int = 0) -> list:
    """(address, value) firmware-port writes installing *key* on *channel*; the final
    eight zero writes follow the wait for DMA_KEY_STATUS.busy = 0."""
    if not isinstance(key, bytes) or len(key) != 32:
        raise ValueError("an AES-256 key is 32 bytes")
    if not isinstance(channel, int) or not 0 <= channel < 16:
        raise ValueError("channel is 0..15")
    if not isinstance(first_counter, int) or not 0 <= first_counter < (1 << 32) - 1:
        raise ValueError("first_counter is 0 .. 2^32 - 2")
    words = [(KEY0 + 4 * k, int.from_bytes(key[4 * k:4 * k + 4], "little")) for k in range(8)]
    return words + [(DMA_KEY_IV, first_counter), (DMA_KEY_CTRL, DMA_KEY_GO | channel)] + \
        [(KEY0 + 4 * k, 0) for k in range(8)]


def session_key_writes(keys: SessionKeys, in_channel: int = 0, out_channel: int = 1) -> list:
    """Both directions of a session: request-direction key on *in_channel* (host → GPU
    frames), response-direction key on *out_channel* (GPU → host frames)."""
    if not isinstance(keys, SessionKeys):
        raise TypeError("keys must be SessionKeys")
    if in_channel == out_channel:
        raise ValueError("the two directions need two channels (cc_dma keeps one key per channel)")
    return key_install_writes(keys.request.key, in_channel) + key_install_writes(keys.response.key, out_channel)
