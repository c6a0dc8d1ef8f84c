"""Writer (and a small reader for tests) of Krafla's .mlb model / .mlt tokenizer files.

Layout (docs/format.md, version 1): b"KRAFLAMB", uint32 version, uint32 flags, uint64
json_size, the metadata JSON, zero padding to data_offset = roundup(24 + json_size, 64),
then the tensor data; each tensor's offset (relative to data_offset) is a multiple of 64.
Sizes follow from dtype and shape, so the whole table is laid out before any data is
written and tensors can be streamed one after another, block of rows by block of rows.
"""
from __future__ import annotations

import json
import os
import struct
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import quant

MAGIC = b"KRAFLAMB"
VERSION = 1
ALIGN = 64
HEADER_BYTES = 24


class MlbError(Exception):
    """A malformed .mlb file or a writer misuse."""


@dataclass
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return quant.nbytes(self.dtype, self.shape)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class AtomicFile:
    """A binary file written under a temporary name beside `path` (PATH.tmpPID) and renamed onto
    it by commit(): a writer that is interrupted (Ctrl-C, an error, a crash, kill -9) never
    leaves a partial file at `path`, and an older file there stays whole until the new one is
    complete. abort(), or an exception inside `with`, removes the temporary file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tmp = f"{path}.tmp{os.getpid()}"
        self.f = open(self.tmp, "wb")

    def commit(self) -> None:
        self.f.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.f.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)

    def __enter__(self) -> "AtomicFile":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class MlbWriter:
    """Streams a .mlb file: the table is fixed up front; write tensors in table order. The file
    appears at `path` only when close() has written it all (AtomicFile); abort() drops it. As a
    context manager it closes at the end of the block, or aborts on an exception (Ctrl-C too)."""

    def __init__(
        self,
        path: str,
        kind: str,
        specs: list[TensorSpec],
        config: dict[str, Any] | None,
        source: dict[str, Any] | None = None,
    ) -> None:
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise MlbError("duplicate tensor names")
        self.specs = specs
        self.table: list[dict[str, Any]] = []
        off = 0
        for s in specs:
            self.table.append(
                {
                    "name": s.name,
                    "dtype": s.dtype,
                    "shape": list(s.shape),
                    "offset": off,
                    "size": s.size,
                }
            )
            off = _align(off + s.size)
        meta: dict[str, Any] = {"format": "krafla-mlb", "kind": kind}
        if config is not None:
            meta["config"] = config
        meta["tokenizer"] = {"json": "tokenizer.json", "config": "tokenizer_config.json"}
        meta["tensors"] = self.table
        meta["source"] = source or {}
        blob = json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.data_offset = _align(HEADER_BYTES + len(blob))
        self.out = AtomicFile(path)
        self.f = self.out.f
        try:
            self.f.write(MAGIC + struct.pack("<IIQ", VERSION, 0, len(blob)) + blob)
            self.f.write(b"\0" * (self.data_offset - HEADER_BYTES - len(blob)))
        except BaseException:
            self.out.abort()
            raise
        self.index = 0
        self.pending = 0  # bytes still due for the current tensor

    def begin(self, name: str) -> TensorSpec:
        """Start the next tensor, which must be `name` (table order)."""
        if self.pending:
            raise MlbError(f"tensor '{self.table[self.index - 1]['name']}' is incomplete")
        if self.index >= len(self.table) or self.table[self.index]["name"] != name:
            raise MlbError(f"tensor '{name}' written out of table order")
        t = self.table[self.index]
        pos = self.f.tell() - self.data_offset
        self.f.write(b"\0" * (t["offset"] - pos))
        self.pending = t["size"]
        self.index += 1
        return self.specs[self.index - 1]

    def write(self, data: bytes) -> None:
        """Append bytes of the current tensor."""
        if len(data) > self.pending:
            raise MlbError(f"tensor '{self.table[self.index - 1]['name']}' overflows its size")
        self.f.write(data)
        self.pending -= len(data)

    def add(self, name: str, data: bytes) -> None:
        self.begin(name)
        self.write(data)

    def close(self) -> None:
        if self.pending or self.index != len(self.table):
            missing = [t["name"] for t in self.table[self.index :]]
            self.abort()  # an incomplete file never appears
            raise MlbError(f"file closed before all tensors were written: {missing}")
        self.out.commit()

    def abort(self) -> None:
        self.out.abort()

    def __enter__(self) -> "MlbWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class MlbReader:
    """Reads and validates a .mlb/.mlt file (for tests and ref tools)."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self.buf = f.read()
        b = self.buf
        if len(b) < HEADER_BYTES or b[:8] != MAGIC:
            raise MlbError(f"{path}: bad magic")
        self.version, self.flags, jsize = struct.unpack_from("<IIQ", b, 8)
        if self.version != VERSION:
            raise MlbError(f"{path}: version {self.version}, reader knows {VERSION}")
        if self.flags:
            raise MlbError(f"{path}: unknown flags {self.flags:#x}")
        if HEADER_BYTES + jsize > len(b):
            raise MlbError(f"{path}: json_size {jsize} beyond file length {len(b)}")
        self.meta = json.loads(b[HEADER_BYTES : HEADER_BYTES + jsize].decode("utf-8"))
        self.data_offset = _align(HEADER_BYTES + jsize)
        self.tensors = {t["name"]: t for t in self.meta["tensors"]}
        for t in self.meta["tensors"]:
            self._validate(path, t)

    def _validate(self, path: str, t: dict[str, Any]) -> None:
        want = quant.nbytes(t["dtype"], tuple(t["shape"]))
        if t["size"] != want:
            raise MlbError(f"{path}: tensor '{t['name']}' size {t['size']} != {want}")
        if t["offset"] % ALIGN:
            raise MlbError(f"{path}: tensor '{t['name']}' offset {t['offset']} not aligned")
        if self.data_offset + t["offset"] + t["size"] > len(self.buf):
            raise MlbError(f"{path}: tensor '{t['name']}' data is not within the file bounds")

    @property
    def config(self) -> dict[str, Any]:
        return self.meta.get("config", {})

    def raw(self, name: str) -> bytes:
        t = self.tensors[name]
        start = self.data_offset + t["offset"]
        return self.buf[start : start + t["size"]]

    def array(self, name: str) -> np.ndarray:
        """The tensor dequantized to float32."""
        t = self.tensors[name]
        if t["dtype"] == "bf16":
            raw = np.frombuffer(self.raw(name), dtype="<u2")
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(t["shape"])
        return quant.dequantize(self.raw(name), t["dtype"], tuple(t["shape"]))


def die(prog: str, msg: str, code: int = 2) -> None:
    """One-line error in the project's style, then exit."""
    print(f"{prog}: error: {msg}", file=sys.stderr)
    sys.exit(code)
