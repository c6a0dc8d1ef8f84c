"""Read the importance-matrix files `ml_run --imatrix FILE` writes (docs/format.md), numpy only.

    KRAFLAIM, u32 version (1), u32 n_entries, i64 tokens; per entry: u32 name length, the name
    (UTF-8), u32 cols, i64 rows, f64[cols] per-channel sums of squares of the matrix's inputs.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"KRAFLAIM"
VERSION = 1


class ImatrixError(Exception):
    """A file that is not a complete imatrix file of this version."""


@dataclass
class Entry:
    rows: int  # input rows accumulated
    sum2: np.ndarray  # float64 [cols]

    def mean_square(self) -> np.ndarray:
        return self.sum2 / max(self.rows, 1)


def read(path: str) -> tuple[dict[str, Entry], int]:
    """The entries by tensor name, and the tokens the file was accumulated over."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if pos + n > len(data):
            raise ImatrixError(f"{path}: truncated imatrix file (reading {what})")
        pos += n
        return data[pos - n : pos]

    if take(8, "the header") != MAGIC:
        raise ImatrixError(f"{path}: not an imatrix file (bad magic)")
    version, n_entries, tokens = struct.unpack("<IIq", take(16, "the header"))
    if version != VERSION:
        raise ImatrixError(f"{path}: imatrix file version {version} (this reads {VERSION})")
    entries: dict[str, Entry] = {}
    for i in range(n_entries):
        what = f"entry {i + 1} of {n_entries}"
        (n,) = struct.unpack("<I", take(4, what))
        if not 0 < n <= 4096:
            raise ImatrixError(f"{path}: {what} has a name of {n} bytes")
        name = take(n, what).decode("utf-8")
        cols, rows = struct.unpack("<Iq", take(12, what))
        if not 0 < cols <= 1 << 24 or rows < 0:
            raise ImatrixError(f"{path}: {what} ('{name}') has {cols} channels and {rows} rows")
        sum2 = np.frombuffer(take(8 * cols, f"{what} ('{name}')"), dtype="<f8").copy()
        entries[name] = Entry(rows, sum2)
    if pos != len(data):
        raise ImatrixError(f"{path}: bytes after the last imatrix entry")
    return entries, tokens
