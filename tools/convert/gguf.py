"""GGUF container writer and reader (numpy only), after ggml's docs/gguf.md (versions 2 and 3).

Layout: b"GGUF", u32 version, u64 tensor_count, u64 kv_count; kv_count key/values (string key,
u32 value type, value); tensor_count tensor infos (string name, u32 n_dims, u64 ne[n_dims] with
ne[0] the fastest-varying dimension, u32 ggml type, u64 offset relative to the data section);
padding to general.alignment (default 32); the data, each tensor at an aligned offset.
Strings are u64 length + UTF-8 bytes; arrays are u32 element type + u64 count + elements.

Tensors here keep the row-major [rows, cols] shape of the rest of the tools; the file's ne is
that reversed.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import mlb  # AtomicFile
from . import quant

MAGIC = b"GGUF"
VERSION = 3
DEFAULT_ALIGN = 32

# value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {
    U8: "<B",
    I8: "<b",
    U16: "<H",
    I16: "<h",
    U32: "<I",
    I32: "<i",
    F32: "<f",
    BOOL: "<?",
    U64: "<Q",
    I64: "<q",
    F64: "<d",
}

# ggml tensor types (ggml.h enum ggml_type) for the dtypes the tools write
GGML_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q8_0": 8,
    "q3_k": 11,
    "q4_k": 12,
    "q6_k": 14,
    "iq4_nl": 20,
    "iq4_xs": 23,
    "bf16": 30,
}
GGML_NAMES = {v: k for k, v in GGML_TYPES.items()}
# general.file_type (llama.h enum llama_ftype)
FILE_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q8_0": 7,
    "q4_k": 15,
    "q4_k_m": 15,
    "q3_k": 12,
    "iq4_nl": 25,
    "iq4_xs": 30,
    "bf16": 32,
}

# tokenizer.ggml.token_type values (llama.cpp's llama_token_type)
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = range(
    1, 7
)


class GgufError(Exception):
    """A malformed GGUF file or a writer misuse."""


@dataclass
class Value:
    """A typed metadata value: vtype is a scalar type, STRING, or ARRAY of elem."""

    vtype: int
    value: Any
    elem: int = 0


def _string(s: str | bytes) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _scalar(t: int, v: Any) -> bytes:
    return _string(v) if t == STRING else struct.pack(SCALAR_FMT[t], v)


def _encode(v: Value) -> bytes:
    out = struct.pack("<I", v.vtype)
    if v.vtype != ARRAY:
        return out + _scalar(v.vtype, v.value)
    out += struct.pack("<IQ", v.elem, len(v.value))
    if v.elem in SCALAR_FMT:  # one numpy conversion for long numeric arrays
        return out + np.asarray(v.value, dtype=SCALAR_FMT[v.elem]).tobytes()
    return out + b"".join(_scalar(v.elem, x) for x in v.value)


def auto(v: Any) -> Value:
    """The usual GGUF type of a Python value: str, bool, int (u32, or i32 when negative),
    float (f32), lists of those (an int list is i32, a float list f32, a str list string)."""
    if isinstance(v, Value):
        return v
    if isinstance(v, str):
        return Value(STRING, v)
    if isinstance(v, bool):
        return Value(BOOL, v)
    if isinstance(v, int):
        return Value(I32 if v < 0 else U32, v)
    if isinstance(v, float):
        return Value(F32, v)
    if isinstance(v, (list, tuple)):
        first = v[0] if len(v) else ""
        elem = STRING if isinstance(first, str) else BOOL if isinstance(first, bool) else None
        if elem is None:
            elem = I32 if isinstance(first, (int, np.integer)) else F32
        return Value(ARRAY, list(v), elem)
    raise GgufError(f"no GGUF type for {type(v).__name__}")


@dataclass
class Tensor:
    name: str
    dtype: str  # a key of GGML_TYPES
    shape: tuple[int, ...]  # row-major, [rows, cols]
    data: bytes


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def write(path: str, kv: dict[str, Any], tensors: list[Tensor], version: int = VERSION) -> None:
    """Write a GGUF file; kv values are Value or plain Python values (see auto)."""
    align = int(auto(kv.get("general.alignment", DEFAULT_ALIGN)).value)
    head = bytearray(MAGIC + struct.pack("<IQQ", version, len(tensors), len(kv)))
    for key, v in kv.items():
        head += _string(key) + _encode(auto(v))
    offset = 0
    for t in tensors:
        want = quant.nbytes(t.dtype, t.shape)
        if len(t.data) != want:
            raise GgufError(f"tensor '{t.name}': {len(t.data)} bytes, {want} expected")
        ne = list(reversed(t.shape))
        head += _string(t.name) + struct.pack(f"<I{len(ne)}Q", len(ne), *ne)
        head += struct.pack("<IQ", GGML_TYPES[t.dtype], offset)
        offset = _align(offset + len(t.data), align)
    with mlb.AtomicFile(path) as out:  # never a partial file at path
        f = out.f
        f.write(head + bytes(_align(len(head), align) - len(head)))
        for t in tensors:
            f.write(t.data + bytes(_align(len(t.data), align) - len(t.data)))


class Reader:
    """Reads a GGUF file whole (for tests and tools): kv (plain values), tensors by name."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        if self.buf[:4] != MAGIC:
            raise GgufError(f"{path}: bad magic")
        self.pos = 4
        self.version, n_tensors, n_kv = self._unpack("<IQQ")
        self.kv: dict[str, Any] = {}
        self.types: dict[str, int] = {}
        for _ in range(n_kv):
            key = self._str()
            (t,) = self._unpack("<I")
            self.types[key] = t
            self.kv[key] = self._value(t)
        self.infos: dict[str, tuple[str, tuple[int, ...], int]] = {}
        for _ in range(n_tensors):
            name = self._str()
            (nd,) = self._unpack("<I")
            ne = self._unpack(f"<{nd}Q")
            gtype, off = self._unpack("<IQ")
            self.infos[name] = (GGML_NAMES.get(gtype, str(gtype)), tuple(reversed(ne)), off)
        self.data_offset = _align(self.pos, int(self.kv.get("general.alignment", DEFAULT_ALIGN)))

    def _unpack(self, fmt: str) -> tuple[Any, ...]:
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def _str(self) -> str:
        (n,) = self._unpack("<Q")
        s = self.buf[self.pos : self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def _value(self, t: int) -> Any:
        if t == STRING:
            return self._str()
        if t != ARRAY:
            return self._unpack(SCALAR_FMT[t])[0]
        elem, n = self._unpack("<IQ")
        return [self._value(elem) for _ in range(n)]

    def raw(self, name: str) -> bytes:
        dtype, shape, off = self.infos[name]
        n = quant.nbytes(dtype, shape)
        start = self.data_offset + off
        return self.buf[start : start + n]

    def array(self, name: str) -> np.ndarray:
        dtype, shape, _ = self.infos[name]
        return quant.dequantize(self.raw(name), dtype, shape)
