"""Gzip bombs for the tests of bounded reads, built in a fraction of a second."""

from __future__ import annotations

import struct
import zlib

_PIECE = 1 << 20


def gzip_of_zeros(size: int) -> bytes:
    """One gzip member holding ``size`` zero bytes (a whole number of MiB), ~1,000 times
    smaller: what ``gzip.compress(bytes(size), 9)`` gives a reader, without the seconds
    it takes to compress a GiB. One MiB is compressed from a fresh state and ended by a
    full flush (byte-aligned, nothing after refers back past it), so its bytes repeated
    inflate to that MiB again and again."""
    if size <= 0 or size % _PIECE:
        raise ValueError(f"a whole number of MiB, not {size}")
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    zeros = bytes(_PIECE)
    piece = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(size // _PIECE):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, no time
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return header + piece * (size // _PIECE) + deflate.flush(zlib.Z_FINISH) + trailer
