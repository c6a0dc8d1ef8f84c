"""Q8_0 and Q4_0 block quantization in the ggml layouts (docs/format.md), vectorized numpy.

Q8_0 block (34 bytes): f16 scale d, 32 x int8 q; value = d*q.
Q4_0 block (18 bytes): f16 scale d, 16 bytes; byte j = element j (low nibble) | element j+16
(high nibble); value = d*(nibble-8).

Q4_1, Q4_K, Q6_K, Q3_K, IQ4_NL and IQ4_XS (ggml's, for GGUF files only: tools/to_gguf.py
--quant) have a quantizer here too, a plain min/max one (not llama.cpp's search); their layouts
are in quantize_q4_1, quantize_q4_k, quantize_q6_k, quantize_q3_k and quantize_iq4.

The 'round' Q4_0 rule reproduces llama.cpp's quantize_row_q4_0_ref bit for bit; the 'fit'
rule searches a few candidate scales per block (plus a least-squares refit of each) and keeps
the one with the smallest squared error (see docs/convert.md).
"""
from __future__ import annotations

import numpy as np

QK = 32
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18, "q4_1": 20, "iq4_nl": 18}
Q8_DTYPE = np.dtype([("d", "<f2"), ("q", "i1", (QK,))])
Q4_DTYPE = np.dtype([("d", "<f2"), ("q", "u1", (QK // 2,))])
Q4_1_DTYPE = np.dtype([("d", "<f2"), ("m", "<f2"), ("q", "u1", (QK // 2,))])
QK_K = 256  # a K-quant super-block
Q4_K_DTYPE = np.dtype(
    [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", (12,)), ("q", "u1", (QK_K // 2,))]
)
Q6_K_DTYPE = np.dtype(
    [("ql", "u1", (QK_K // 2,)), ("qh", "u1", (QK_K // 4,)), ("scales", "i1", (16,)), ("d", "<f2")]
)
Q3_K_DTYPE = np.dtype(
    [("hmask", "u1", (32,)), ("qs", "u1", (64,)), ("scales", "u1", (12,)), ("d", "<f2")]
)
IQ4_XS_DTYPE = np.dtype(
    [("d", "<f2"), ("scales_h", "<u2"), ("scales_l", "u1", (4,)), ("q", "u1", (QK_K // 2,))]
)
K_DTYPES = {"q4_k": Q4_K_DTYPE, "q6_k": Q6_K_DTYPE, "q3_k": Q3_K_DTYPE, "iq4_xs": IQ4_XS_DTYPE}
# IQ4_NL/IQ4_XS: a nibble indexes one of these 16 levels (ggml's kvalues_iq4nl); value = d*level
IQ4_LEVELS = np.array(
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32
)

# Candidate divisors c for the Q4_0 'fit' rule: the first scale is d = signed_max / c; the
# nibbles it gives then get a least-squares scale. c = -8 is llama.cpp's rule (the extreme
# value lands on nibble 0); positive c put it on the +7 side instead. This set lowers the
# squared error of Gaussian weights by ~10% against 'round' (more candidates gain little).
FIT_DIVISORS = (-8.5, -8.0, -7.5, -7.0, -6.5, 7.0, 6.5)
# The smallest f16 above zero (a subnormal, 2^-24). A block whose values are all tiny (below
# ~2e-7) has a scale that rounds to 0 in f16, which would zero the whole block; 'fit' then
# tries this scale instead, and keeps it when it is closer (docs/quantization.md).
F16_TINY = np.float32(2.0**-24)


def _blocks(x: np.ndarray) -> np.ndarray:
    """View a [rows, cols] (or 1-D) float array as [n_blocks, 32] float32."""
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-1] % QK:
        raise ValueError(f"cols {x.shape[-1]} is not a multiple of {QK}")
    return x.reshape(-1, QK)


def _round_away(x: np.ndarray) -> np.ndarray:
    """C roundf: halves away from zero (np.round rounds halves to even)."""
    return np.trunc(x + np.copysign(np.float32(0.5), x))


def quantize_q8_0(x: np.ndarray) -> bytes:
    """Quantize rows of x (cols % 32 == 0) to Q8_0 bytes, as ggml's quantize_row_q8_0_ref."""
    b = _blocks(x)
    amax = np.abs(b).max(axis=1)
    d = amax / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    out = np.empty(b.shape[0], dtype=Q8_DTYPE)
    out["d"] = d.astype(np.float16)
    out["q"] = _round_away(b * inv[:, None]).astype(np.int8)
    return out.tobytes()


def dequantize_q8_0(data: bytes | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    blk = np.frombuffer(data, dtype=Q8_DTYPE)
    vals = blk["d"].astype(np.float32)[:, None] * blk["q"].astype(np.float32)
    return vals.reshape(shape)


def _pack_q4(d: np.ndarray, nib: np.ndarray) -> bytes:
    out = np.empty(nib.shape[0], dtype=Q4_DTYPE)
    out["d"] = d.astype(np.float16)
    nib = nib.astype(np.uint8)
    out["q"] = nib[:, : QK // 2] | (nib[:, QK // 2 :] << 4)
    return out.tobytes()


def _signed_max(b: np.ndarray) -> np.ndarray:
    """Per block, the value of largest magnitude (first one on ties, as ggml)."""
    idx = np.abs(b).argmax(axis=1)
    return b[np.arange(b.shape[0]), idx]


def _nibbles(b: np.ndarray, d: np.ndarray) -> np.ndarray:
    """ggml's nibble rule: min(15, (int)(x/d + 8.5)) with id = 1/d (0 when d == 0)."""
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = b * inv[:, None]
    v += np.float32(8.5)
    np.floor(v, out=v)  # = trunc here: negatives are clamped to 0 anyway
    return np.clip(v, 0, 15, out=v)


def quantize_q4_0(x: np.ndarray, rule: str = "fit", importance: np.ndarray | None = None) -> bytes:
    """Quantize rows of x to Q4_0 bytes with the 'round' (llama.cpp) or 'fit' rule. With
    importance (one weight per column of x, e.g. an imatrix's mean squares of the inputs) the
    fit minimises the importance-weighted squared error instead."""
    b = _blocks(x)
    if rule == "round":
        d = (_signed_max(b) / np.float32(-8)).astype(np.float32)
        return _pack_q4(d, _nibbles(b, d))
    if rule != "fit":
        raise ValueError(f"unknown q4 rule '{rule}'")
    w = None
    if importance is not None:
        imp = np.asarray(importance, dtype=np.float32)
        if imp.shape != (x.shape[-1],):
            raise ValueError(f"importance of shape {imp.shape} for {x.shape[-1]} columns")
        w = np.broadcast_to(imp, x.shape).reshape(-1, QK)
    return _quantize_q4_0_fit(b, w)


def _q4_error(b: np.ndarray, d16: np.ndarray, nib: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    r = nib - np.float32(8)
    r *= d16[:, None]
    np.subtract(b, r, out=r)
    return np.einsum("ij,ij->i", r, r if w is None else r * w)


def _quantize_q4_0_fit(b: np.ndarray, w: np.ndarray | None = None) -> bytes:
    m = _signed_max(b)
    # Start from llama.cpp's exact result, so 'fit' is never worse than 'round' on a block.
    d0 = (m / np.float32(-8)).astype(np.float32)
    best_nib = _nibbles(b, d0)
    best_d = d0.astype(np.float16).astype(np.float32)
    best_err = _q4_error(b, best_d, best_nib, w)
    bw = b if w is None else b * w
    for c in FIT_DIVISORS:
        d = (m / np.float32(c)).astype(np.float32)
        nib = _nibbles(b, d)
        # Least-squares refit of the scale for these nibbles, then requantize once.
        qv = nib
        qv -= np.float32(8)
        den = np.einsum("ij,ij->i", qv, qv if w is None else qv * w)
        with np.errstate(divide="ignore", invalid="ignore"):
            d_ls = np.where(den > 0, np.einsum("ij,ij->i", bw, qv) / den, d).astype(np.float32)
        d16 = d_ls.astype(np.float16).astype(np.float32)
        d16 = np.where((d16 == 0) & (m != 0), np.copysign(F16_TINY, d), d16)
        n = _nibbles(b, d16)
        err = _q4_error(b, d16, n, w)
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best_d = np.where(better, d16, best_d)
        np.copyto(best_nib, n, where=better[:, None])
    return _pack_q4(best_d, best_nib)


def dequantize_q4_0(data: bytes | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    blk = np.frombuffer(data, dtype=Q4_DTYPE)
    q = blk["q"]
    nib = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.float32)
    vals = blk["d"].astype(np.float32)[:, None] * (nib - np.float32(8))
    return vals.reshape(shape)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b, 0 where b is 0."""
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape, np.float32), where=b != 0)


def quantize_q4_1(x: np.ndarray) -> bytes:
    """ggml's Q4_1 block (20 bytes): f16 scale d, f16 min m, 16 bytes nibbled as Q4_0's;
    value = d*nibble + m. Here m = the block's min, d = (max - min) / 15."""
    b = _blocks(x).astype(np.float32)
    lo, hi = b.min(axis=1), b.max(axis=1)
    out = np.zeros(len(b), dtype=Q4_1_DTYPE)
    out["d"], out["m"] = (hi - lo) / np.float32(15), lo
    d, m = out["d"].astype(np.float32)[:, None], out["m"].astype(np.float32)[:, None]
    nib = np.clip(np.rint(_div(b - m, d)), 0, 15).astype(np.uint8)
    out["q"] = nib[:, : QK // 2] | (nib[:, QK // 2 :] << 4)
    return out.tobytes()


def dequantize_q4_1(data: bytes | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    blk = np.frombuffer(data, dtype=Q4_1_DTYPE)
    q = blk["q"]
    nib = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.float32)
    d, m = blk["d"].astype(np.float32)[:, None], blk["m"].astype(np.float32)[:, None]
    return (d * nib + m).astype(np.float32).reshape(shape)


def quantize_q4_k(x: np.ndarray) -> bytes:
    """ggml's Q4_K super-block (144 bytes per 256 values): f16 d, f16 dmin, 12 bytes of 8 six-bit
    (scale, min) pairs, 128 bytes of nibbles (sub-blocks 2i and 2i+1: low and high nibbles of
    bytes 32i..32i+31); value = d*scale*nibble - dmin*min per 32-value sub-block. Here each
    sub-block's min is min(values, 0) and its scale spans to its max."""
    if x.shape[-1] % QK_K:
        raise ValueError(f"cols {x.shape[-1]} is not a multiple of {QK_K}")
    b = x.reshape(-1, 8, QK).astype(np.float32)
    lo, hi = np.minimum(b.min(axis=2), 0), b.max(axis=2)
    scale, mins = (hi - lo) / np.float32(15), -lo
    out = np.zeros(len(b), dtype=Q4_K_DTYPE)
    out["d"], out["dmin"] = scale.max(axis=1) / 63, mins.max(axis=1) / 63
    d, dmin = out["d"].astype(np.float32)[:, None], out["dmin"].astype(np.float32)[:, None]
    sc = np.clip(np.rint(_div(scale, d)), 0, 63).astype(np.uint8)
    mn = np.clip(np.rint(_div(mins, dmin)), 0, 63).astype(np.uint8)
    nib = np.clip(np.rint(_div(b + (dmin * mn)[..., None], (d * sc)[..., None])), 0, 15)
    s = out["scales"]
    s[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    s[:, 4:8] = (mn[:, :4] & 63) | ((mn[:, 4:] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:] & 15) | ((mn[:, 4:] & 15) << 4)
    nib = nib.astype(np.uint8).reshape(-1, 4, 2, QK)
    out["q"] = (nib[:, :, 0] | (nib[:, :, 1] << 4)).reshape(-1, QK_K // 2)
    return out.tobytes()


def dequantize_q4_k(data: bytes | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    blk = np.frombuffer(data, dtype=Q4_K_DTYPE)
    s = blk["scales"].astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    q = blk["q"].reshape(-1, 4, 1, QK)
    nib = np.concatenate([q & 0x0F, q >> 4], axis=2).reshape(-1, 8, QK).astype(np.float32)
    d, dmin = blk["d"].astype(np.float32)[:, None], blk["dmin"].astype(np.float32)[:, None]
    vals = (d * sc)[..., None] * nib - (dmin * mn)[..., None]
    return vals.astype(np.float32).reshape(shape)


def _super_blocks(x: np.ndarray) -> np.ndarray:
    if x.shape[-1] % QK_K:
        raise ValueError(f"cols {x.shape[-1]} is not a multiple of {QK_K}")
    return x.reshape(-1, QK_K).astype(np.float32)


def quantize_q6_k(x: np.ndarray) -> bytes:
    """ggml's Q6_K super-block (210 bytes per 256 values): 128 bytes ql (low 4 bits), 64 bytes
    qh (high 2 bits), 16 int8 scales (one per 16 values, in order), f16 d; value =
    d*scale*(q - 32). Each half of 128 values h and l < 32: values 32g + l (g = 0..3) take the
    low nibble of ql[64h + l] (g 0), of ql[64h + 32 + l] (g 1), the high nibbles of the same
    (g 2, 3), and bits 2g..2g+1 of qh[32h + l]. Here each 16 values' scale spans its max|x|
    with q - 32 in -31..31, and d spans the largest scale with the int8s in -127..127."""
    b = _super_blocks(x)
    sub = b.reshape(-1, 16, 16)
    s = np.abs(sub).max(axis=2) / np.float32(31)
    out = np.zeros(len(b), dtype=Q6_K_DTYPE)
    out["d"] = s.max(axis=1) / np.float32(127)
    d = out["d"].astype(np.float32)[:, None]
    sc = np.clip(np.rint(_div(s, d)), -127, 127).astype(np.int8)
    out["scales"] = sc
    q = np.clip(np.rint(_div(sub, (d * sc)[..., None])), -32, 31).astype(np.int32) + 32
    q = q.reshape(-1, 2, 4, 32).astype(np.uint8)  # [block, half, group, l]
    low, high = q & 15, q >> 4
    out["ql"] = np.concatenate(
        [low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], axis=2
    ).reshape(-1, QK_K // 2)
    qh = high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6)
    out["qh"] = qh.reshape(-1, QK_K // 4)
    return out.tobytes()


def dequantize_q6_k(data: bytes | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    blk = np.frombuffer(data, dtype=Q6_K_DTYPE)
    ql = blk["ql"].reshape(-1, 2, 2, 32)  # [block, half, first/second 32 bytes, l]
    qh = blk["qh"].reshape(-1, 2, 1, 32)
    low = np.stack([ql[:, :, 0] & 15, ql[:, :, 1] & 15, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], 2)
    high = (qh >> np.array([0, 2, 4, 6], np.uint8)[None, None, :, None]) & 3
    q = (low | (high << 4)).astype(np.float32).reshape(-1, 16, 16) - 32
    d = blk["d"].astype(np.float32)[:, None, None]
    vals = d * blk["scales"].astype(np.float32)[..., None] * q
    return vals.astype(np.float32).reshape(shape)


def _iq4_nibbles(b: np.ndarray, d: np.ndarray) -> np.ndarray:
    """[n, 32] values over per-block scales d [n]: the index of the nearest level of each x/d."""
    v = _div(b, d[:, None])
    return np.abs(v[..., None] - IQ4_LEVELS).argmin(axis=-1).astype(np.uint8)


def _iq4_pack(nib: np.ndarray) -> np.ndarray:
    """[n, 32] nibbles -> [n, 16] bytes: byte j = value j (low nibble) | value j + 16 (high)."""
    return nib[:, :16] | (nib[:, 16:] << 4)


def _iq4_unpack(q: np.ndarray) -> np.ndarray:
    q = q.reshape(-1, 16)
    return IQ4_LEVELS[np.concatenate([q & 15, q >> 4], axis=1)]


def quantize_iq4(x: np.ndarray, xs: bool) -> bytes:
    """ggml's IQ4_NL (18 bytes per 32 values: f16 d, 16 bytes of nibbles as Q4_0's) or, with
    xs, IQ4_XS (136 bytes per 256: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of
    nibbles; sub-block k of 32 has the 6-bit scale ls = nibble k % 2 of scales_l[k / 2] | bits
    2k..2k+1 of scales_h << 4, value = d*(ls - 32)*level). Here each 32 values' scale puts its
    value of largest magnitude on the level -127; IQ4_XS's d spans those scales in -32..31."""
    b = _blocks(x)
    s = _signed_max(b) / np.float32(-127)
    if not xs:
        out = np.zeros(len(b), dtype=Q4_DTYPE)
        out["d"] = s.astype(np.float16)
        out["q"] = _iq4_pack(_iq4_nibbles(b, out["d"].astype(np.float32)))
        return out.tobytes()
    s = s.reshape(-1, 8)
    out = np.zeros(len(s), dtype=IQ4_XS_DTYPE)
    out["d"] = (np.abs(s).max(axis=1) / np.float32(31)).astype(np.float16)
    d = out["d"].astype(np.float32)[:, None]
    ls = (np.clip(np.rint(_div(s, d)), -32, 31) + 32).astype(np.uint16)  # [block, 8]
    out["scales_l"] = ((ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)).astype(np.uint8)
    out["scales_h"] = ((ls >> 4) << (2 * np.arange(8, dtype=np.uint16))).sum(axis=1)
    dl = (d * (ls.astype(np.float32) - 32)).reshape(-1)
    out["q"] = _iq4_pack(_iq4_nibbles(b, dl)).reshape(-1, QK_K // 2)
    return out.tobytes()


def dequantize_iq4(data: bytes | np.ndarray, shape: tuple[int, ...], xs: bool) -> np.ndarray:
    if not xs:
        blk = np.frombuffer(data, dtype=Q4_DTYPE)
        vals = blk["d"].astype(np.float32)[:, None] * _iq4_unpack(blk["q"])
        return vals.reshape(shape)
    blk = np.frombuffer(data, dtype=IQ4_XS_DTYPE)
    k = np.arange(8)
    lo = (blk["scales_l"][:, k // 2] >> (4 * (k % 2))) & 15
    hi = (blk["scales_h"][:, None] >> (2 * k).astype(np.uint16)) & 3
    ls = (lo.astype(np.int32) | (hi.astype(np.int32) << 4)) - 32
    dl = blk["d"].astype(np.float32)[:, None] * ls.astype(np.float32)
    vals = dl.reshape(-1, 1) * _iq4_unpack(blk["q"])
    return vals.astype(np.float32).reshape(shape)


def quantize_q3_k(x: np.ndarray) -> bytes:
    """ggml's Q3_K (110 bytes per 256 values): hmask 32, qs 64, scales 12, f16 d. In half h of
    128 values, value 32g + l (g = 0..3, l < 32) has 3-bit q: bits 0-1 at bits 2g..2g+1 of
    qs[32h + l], bit 2 at bit 4h + g of hmask[l]; value = d*(sc - 32)*(q - 4) with the 6-bit
    scale sc of its 16 values number 8h + 2g + l / 16, whose low 4 bits are nibble s / 8 of
    scales[s % 8] and top 2 bits bits 2(s / 4).. of scales[8 + s % 4]. Here each 16 values'
    scale puts the value of largest magnitude on q - 4 = -4; d spans those in -32..31."""
    sub = _super_blocks(x).reshape(-1, 16, 16)
    s = np.take_along_axis(sub, np.abs(sub).argmax(axis=2)[..., None], 2)[..., 0] / np.float32(-4)
    out = np.zeros(len(sub), dtype=Q3_K_DTYPE)
    out["d"] = (np.abs(s).max(axis=1) / np.float32(31)).astype(np.float16)
    d = out["d"].astype(np.float32)[:, None]
    sc = (np.clip(np.rint(_div(s, d)), -32, 31) + 32).astype(np.uint8)  # [block, 16]
    q = np.clip(np.rint(_div(sub, (d * (sc.astype(np.float32) - 32))[..., None])), -4, 3) + 4
    q = q.astype(np.uint8).reshape(-1, 2, 4, 32)  # [block, half, group, l]
    g = np.arange(4, dtype=np.uint8)[None, None, :, None]
    out["qs"] = ((q & 3) << (2 * g)).sum(axis=2, dtype=np.uint8).reshape(-1, 64)
    h = np.arange(2, dtype=np.uint8)[None, :, None, None]
    out["hmask"] = ((q >> 2) << (4 * h + g)).sum(axis=(1, 2), dtype=np.uint8)
    s_idx = np.arange(16)
    scales = np.zeros((len(sub), 12), np.uint8)
    for i in s_idx:
        scales[:, i % 8] |= (sc[:, i] & 15) << (4 * (i // 8))
        scales[:, 8 + i % 4] |= (sc[:, i] >> 4) << (2 * (i // 4))
    out["scales"] = scales
    return out.tobytes()


def dequantize_q3_k(data: bytes | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    blk = np.frombuffer(data, dtype=Q3_K_DTYPE)
    s = np.arange(16)
    sb = blk["scales"].astype(np.int32)
    lo = (sb[:, s % 8] >> (4 * (s // 8))) & 15
    hi = (sb[:, 8 + s % 4] >> (2 * (s // 4))) & 3
    sc = (lo | (hi << 4)) - 32  # [block, 16]
    g = np.arange(4)[None, None, :, None]
    h = np.arange(2)[None, :, None, None]
    qs = blk["qs"].astype(np.int32).reshape(-1, 2, 1, 32)
    hm = blk["hmask"].astype(np.int32).reshape(-1, 1, 1, 32)
    q = ((qs >> (2 * g)) & 3) | (((hm >> (4 * h + g)) & 1) << 2)  # [block, half, group, l]
    d = blk["d"].astype(np.float32)[:, None, None]
    vals = d * sc.astype(np.float32)[..., None] * (q.reshape(-1, 16, 16) - 4).astype(np.float32)
    return vals.astype(np.float32).reshape(shape)


def quantize(
    x: np.ndarray, dtype: str, q4_rule: str = "fit", importance: np.ndarray | None = None
) -> bytes:
    """Encode a float array as dtype's bytes (f32, f16, q8_0, q4_0; importance: see
    quantize_q4_0)."""
    if dtype == "f32":
        return np.ascontiguousarray(x, dtype="<f4").tobytes()
    if dtype == "f16":
        return np.ascontiguousarray(x, dtype="<f2").tobytes()
    if dtype == "q8_0":
        return quantize_q8_0(x)
    if dtype == "q4_0":
        return quantize_q4_0(x, q4_rule, importance)
    if dtype == "q4_1":
        return quantize_q4_1(x)
    if dtype == "q4_k":
        return quantize_q4_k(x)
    if dtype == "q6_k":
        return quantize_q6_k(x)
    if dtype == "q3_k":
        return quantize_q3_k(x)
    if dtype in ("iq4_nl", "iq4_xs"):
        return quantize_iq4(x, dtype == "iq4_xs")
    raise ValueError(f"unknown dtype '{dtype}'")


def dequantize(data: bytes | np.ndarray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "f32":
        return np.frombuffer(data, dtype="<f4").reshape(shape).astype(np.float32)
    if dtype == "f16":
        return np.frombuffer(data, dtype="<f2").reshape(shape).astype(np.float32)
    if dtype == "q8_0":
        return dequantize_q8_0(data, shape)
    if dtype == "q4_0":
        return dequantize_q4_0(data, shape)
    if dtype == "q4_1":
        return dequantize_q4_1(data, shape)
    if dtype == "q4_k":
        return dequantize_q4_k(data, shape)
    if dtype == "q6_k":
        return dequantize_q6_k(data, shape)
    if dtype == "q3_k":
        return dequantize_q3_k(data, shape)
    if dtype in ("iq4_nl", "iq4_xs"):
        return dequantize_iq4(data, shape, dtype == "iq4_xs")
    raise ValueError(f"unknown dtype '{dtype}'")


def round_trip(x: np.ndarray, dtype: str, q4_rule: str = "fit") -> np.ndarray:
    """x after quantization to dtype and back (float32)."""
    return dequantize(quantize(x, dtype, q4_rule), dtype, x.shape)


def act_round_trip(x: np.ndarray) -> np.ndarray:
    """A matmul input as the runtime's quantized dot products see it: each block of 32 in
    8 bits with a float32 scale d = max|x| / 127, q = x * (1 / d) rounded half to even (the SIMD
    conversion), then q * d. The scalar build stores d in f16, which moves each block's scale by
    at most 2^-11 relative: far inside any tolerance this is compared with."""
    b = _blocks(x)
    d = (np.abs(b).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.rint(b * inv), -127, 127)
    return (q * d).astype(np.float32).reshape(np.shape(x))


def nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes that a tensor of dtype and shape occupies (docs/format.md dtype table)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if dtype in BLOCK_BYTES:
        if not shape or shape[-1] % QK:
            raise ValueError(f"{dtype} needs cols % {QK} == 0, got shape {list(shape)}")
        return n // QK * BLOCK_BYTES[dtype]
    if dtype in K_DTYPES:
        if not shape or shape[-1] % QK_K:
            raise ValueError(f"{dtype} needs cols % {QK_K} == 0, got shape {list(shape)}")
        return n // QK_K * K_DTYPES[dtype].itemsize
    per = {"f32": 4, "f16": 2, "bf16": 2, "bytes": 1}
    if dtype not in per:
        raise ValueError(f"unknown dtype '{dtype}'")
    return n * per[dtype]
