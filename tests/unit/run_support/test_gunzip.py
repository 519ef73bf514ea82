"""``safe_files.Gunzip`` reads what ``gzip`` reads, a bounded piece at a time."""

from __future__ import annotations

import gzip
import io
import zlib

import pytest
from helpers.bombs import gzip_of_zeros
from hypothesis import given
from hypothesis import strategies as st

from run_support.safe_files import Gunzip


def read_all(data: bytes, size: int) -> tuple[bytes, int]:
    """Everything read back ``size`` at a time, and the largest piece one read gave."""
    reader = Gunzip(io.BytesIO(data))  # type: ignore[arg-type]
    pieces = []
    while piece := reader.read(size):
        pieces.append(piece)
    return b"".join(pieces), max(map(len, pieces), default=0)


@given(st.lists(st.binary(max_size=5000), min_size=1, max_size=4), st.integers(1, 3000))
def test_members_read_back_as_gzip_reads_them_never_past_the_size(
    members: list[bytes], size: int
) -> None:
    data = b"".join(gzip.compress(member) for member in members)
    got, largest = read_all(data, size)
    assert got == gzip.decompress(data) == b"".join(members)
    assert largest <= size


def test_a_bomb_is_read_one_bounded_piece_at_a_time() -> None:
    data = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 KB holding 64 MiB
    got, largest = read_all(data, 1 << 16)
    assert len(got) == 64 << 20 and largest == 1 << 16


def test_a_stream_cut_short_is_an_eof_error() -> None:
    data = gzip.compress(b"x" * 100_000)
    with pytest.raises(EOFError):
        read_all(data[: len(data) // 2], 4096)


def test_the_bomb_the_e2e_tests_build_is_one_gzip_member_of_zeros() -> None:
    data = gzip_of_zeros(3 << 20)
    assert gzip.decompress(data) == bytes(3 << 20)
    got, largest = read_all(data, 1 << 16)
    assert got == bytes(3 << 20) and largest == 1 << 16
    member = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert member.decompress(data) == bytes(3 << 20) and member.eof and not member.unused_data
