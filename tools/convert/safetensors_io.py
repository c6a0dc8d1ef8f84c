"""Read and write safetensors files with numpy only.

Format: 8-byte little-endian header length N, N bytes of JSON ({name: {dtype, shape,
data_offsets: [begin, end]}, optional "__metadata__"}), then the raw little-endian data;
offsets are relative to the end of the header. BF16 is widened to F32 by a 16-bit shift.
Sharded checkpoints list their files in model.safetensors.index.json ("weight_map").
"""
from __future__ import annotations

import json
import mmap
import os
import struct
from dataclasses import dataclass
from typing import Iterator

import numpy as np

NP_DTYPES = {
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "F64": "<f8",
    "I32": "<i4",
    "I64": "<i8",
    "I8": "i1",
    "U8": "u1",
    "I16": "<i2",
    "BOOL": "?",
}


class SafetensorsError(Exception):
    """A malformed or unsupported safetensors file."""


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    """uint16 bf16 bit patterns -> float32 (exact)."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> uint16 bf16 bit patterns, round to nearest even (NaN kept quiet)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, (u >> 16) | np.uint32(0x40), rounded).astype(np.uint16)


@dataclass
class TensorInfo:
    name: str
    dtype: str  # safetensors dtype name: F32, F16, BF16, ...
    shape: tuple[int, ...]
    path: str
    begin: int  # absolute byte offset in the file
    end: int


class SafetensorsFile:
    """One .safetensors file, memory-mapped; tensors are read lazily."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._f = open(path, "rb")
        size = os.fstat(self._f.fileno()).st_size
        if size < 8:
            raise SafetensorsError(f"{path}: file too short ({size} bytes)")
        (n,) = struct.unpack("<Q", self._f.read(8))
        if 8 + n > size:
            raise SafetensorsError(f"{path}: header length {n} exceeds file size {size}")
        header = json.loads(self._f.read(n))
        self.metadata = header.pop("__metadata__", {})
        self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.tensors: dict[str, TensorInfo] = {}
        for name, h in header.items():
            b, e = h["data_offsets"]
            info = TensorInfo(name, h["dtype"], tuple(h["shape"]), path, 8 + n + b, 8 + n + e)
            if info.end > size or b > e:
                raise SafetensorsError(f"{path}: tensor '{name}' data {b}..{e} outside the file")
            self.tensors[name] = info

    def raw(self, name: str) -> np.ndarray:
        """The tensor in its stored dtype (bf16 as uint16), a read-only view of the map."""
        t = self.tensors[name]
        if t.dtype not in NP_DTYPES:
            raise SafetensorsError(f"{self.path}: tensor '{name}' has unsupported dtype {t.dtype}")
        dt = np.dtype(NP_DTYPES[t.dtype])
        count = (t.end - t.begin) // dt.itemsize
        if count != int(np.prod(t.shape, dtype=np.int64)):
            raise SafetensorsError(
                f"{self.path}: tensor '{name}' size does not match shape {t.shape}"
            )
        return np.frombuffer(self._mm, dtype=dt, count=count, offset=t.begin).reshape(t.shape)

    def get(self, name: str, rows: slice | tuple | None = None) -> np.ndarray:
        """The tensor (optionally a slice of its first axis, or any numpy index: (e, slice) reads
        rows of matrix e of a 3-D tensor) as float32."""
        a = self.raw(name)
        if rows is not None:
            a = a[rows]
        return to_f32(a, self.tensors[name].dtype)

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
        self._f.close()


def to_f32(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return bf16_to_f32(a)
    if dtype in ("F32", "F16", "F64"):
        return a.astype(np.float32)
    raise SafetensorsError(f"dtype {dtype} is not a float type")


class Checkpoint:
    """All *.safetensors shards of a Hugging Face model directory, as one name -> tensor map."""

    def __init__(self, model_dir: str) -> None:
        index = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = sorted(p for p in os.listdir(model_dir) if p.endswith(".safetensors"))
            # Mistral repos also ship consolidated.safetensors (Mistral's own tensor names).
            hf = [p for p in files if not p.startswith("consolidated")]
            files = hf or files
        if not files:
            raise SafetensorsError(f"{model_dir}: no *.safetensors file")
        self.files = [SafetensorsFile(os.path.join(model_dir, p)) for p in files]
        self.where: dict[str, SafetensorsFile] = {}
        for sf in self.files:
            for name in sf.tensors:
                self.where[name] = sf

    def names(self) -> list[str]:
        return list(self.where)

    def info(self, name: str) -> TensorInfo:
        return self.where[name].tensors[name]

    def get(self, name: str, rows: slice | tuple | None = None) -> np.ndarray:
        return self.where[name].get(name, rows)

    def close(self) -> None:
        for sf in self.files:
            sf.close()


def _encode(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return f32_to_bf16(a)
    return np.ascontiguousarray(a, dtype=NP_DTYPES[dtype])


def save_file(
    path: str,
    tensors: dict[str, tuple[tuple[int, ...], str]],
    chunks: Iterator[tuple[str, np.ndarray]],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write a safetensors file streaming: `tensors` gives name -> (shape, dtype) in file
    order; `chunks` yields (name, float array piece) in that order, row blocks concatenated."""
    header: dict = {"__metadata__": metadata} if metadata else {}
    off = 0
    for name, (shape, dtype) in tensors.items():
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(NP_DTYPES[dtype]).itemsize
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    written = {name: 0 for name in tensors}
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, piece in chunks:
            buf = _encode(piece, tensors[name][1]).tobytes()
            written[name] += len(buf)
            f.write(buf)
    for name, h in header.items():
        if name != "__metadata__" and written[name] != h["data_offsets"][1] - h["data_offsets"][0]:
            raise SafetensorsError(f"{path}: tensor '{name}' got {written[name]} bytes")


def save_dict(path: str, arrays: dict[str, np.ndarray], dtype: str = "F32") -> None:
    """Convenience: write whole arrays (tests, small models)."""
    spec = {k: (tuple(v.shape), dtype) for k, v in arrays.items()}
    save_file(path, spec, iter(arrays.items()))
