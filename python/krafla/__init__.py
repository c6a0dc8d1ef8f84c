"""Krafla from Python: the C API (include/krafla/krafla.h) through the standard library's ctypes.

    import krafla
    model = krafla.Model("brown.mlb", threads=2)
    for piece in model.generate("The jury said", max_tokens=40, temperature=0):
        print(piece, end="", flush=True)
    print(model.chat([{"role": "user", "content": "Hi"}], max_tokens=64))

The shared library is found through $KRAFLA_LIBRARY (a path to libkrafla.so), else next to this
package, else by the system's loader (ctypes.util.find_library). Errors of the library are
raised as krafla.Error with its message.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Iterator, Sequence

__all__ = ["Error", "Model", "Session", "SamplerParams", "version", "isa"]


class Error(RuntimeError):
    """A call into the library failed; the message names what was wrong."""


def _find_library() -> str:
    path = os.environ.get("KRAFLA_LIBRARY")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.startswith("libkrafla.so"):
            return os.path.join(here, name)
    found = ctypes.util.find_library("krafla")
    if not found:
        raise Error("libkrafla.so not found: set KRAFLA_LIBRARY, or build with -DKRAFLA_SHARED=ON")
    return found


class SamplerParams(ctypes.Structure):
    """krafla_sampler_params: the sampling steps of include/krafla/sampler.h."""

    _fields_ = [
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
    ]


class _ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


_P = ctypes.c_void_p
_I32 = ctypes.c_int32
_I32P = ctypes.POINTER(ctypes.c_int32)
_SIGNATURES = {
    "krafla_version": (ctypes.c_char_p, []),
    "krafla_isa": (ctypes.c_char_p, []),
    "krafla_last_error": (ctypes.c_char_p, []),
    "krafla_model_load": (_P, [ctypes.c_char_p, ctypes.c_int]),
    "krafla_model_free": (None, [_P]),
    "krafla_model_n_vocab": (_I32, [_P]),
    "krafla_model_n_ctx_train": (_I32, [_P]),
    "krafla_model_arch": (ctypes.c_char_p, [_P]),
    "krafla_model_chat_template": (ctypes.c_char_p, [_P]),
    "krafla_token_bos": (_I32, [_P]),
    "krafla_token_eos": (_I32, [_P]),
    "krafla_token_is_eog": (ctypes.c_int, [_P, _I32]),
    "krafla_tokenize": (_I32, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, _I32P, _I32]),
    "krafla_detokenize": (_I32, [_P, _I32P, _I32, ctypes.c_char_p, _I32]),
    "krafla_decoder_new": (_P, [_P, ctypes.c_int]),
    "krafla_decoder_free": (None, [_P]),
    "krafla_decoder_push": (ctypes.POINTER(ctypes.c_char), [_P, _I32, _I32P]),
    "krafla_decoder_flush": (ctypes.POINTER(ctypes.c_char), [_P, _I32P]),
    "krafla_session_new": (_P, [_P, _I32, ctypes.c_int]),
    "krafla_session_free": (None, [_P]),
    "krafla_session_eval": (ctypes.c_int, [_P, _I32P, _I32]),
    "krafla_session_logits": (ctypes.POINTER(ctypes.c_float), [_P]),
    "krafla_session_n_past": (_I32, [_P]),
    "krafla_session_n_ctx": (_I32, [_P]),
    "krafla_session_truncate": (ctypes.c_int, [_P, _I32]),
    "krafla_sampler_default_params": (SamplerParams, []),
    "krafla_sampler_new": (_P, [ctypes.POINTER(SamplerParams)]),
    "krafla_sampler_free": (None, [_P]),
    "krafla_sampler_sample": (_I32, [_P, _P]),
    "krafla_chat_apply": (
        _I32,
        [
            _P,
            ctypes.c_char_p,
            ctypes.POINTER(_ChatMessage),
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_char_p,
            _I32,
        ],
    ),
    "krafla_chat_stop_tokens": (_I32, [_P, ctypes.c_char_p, _I32P, _I32]),
}

_lib = ctypes.CDLL(_find_library())
for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(_lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def _check(result, fail):
    """Raises Error with the library's message when a call returned its failure value."""
    if result == fail or (fail is None and not result):
        raise Error(_lib.krafla_last_error().decode("utf-8", "replace"))
    return result


def _ids(ids: Sequence[int]):
    return (ctypes.c_int32 * len(ids))(*ids)


def version() -> str:
    return _lib.krafla_version().decode()


def isa() -> str:
    """The kernel ISA the library was built for ("avx512vnni", "neon", ...)."""
    return _lib.krafla_isa().decode()


class Session:
    """A KV cache and the forward pass over it (krafla_session)."""

    def __init__(self, model: "Model", n_ctx: int = 0, threads: int = 0):
        self.model = model  # the session uses the model: keep it alive
        self._s = _check(_lib.krafla_session_new(model._m, n_ctx, threads), None)

    def close(self) -> None:
        if self._s:
            _lib.krafla_session_free(self._s)
            self._s = None

    def __del__(self):
        self.close()

    def eval(self, ids: Sequence[int]) -> None:
        """Appends ids at the next positions; nothing is evaluated when one is refused."""
        if ids:
            _check(_lib.krafla_session_eval(self._s, _ids(ids), len(ids)), -1)

    def logits(self) -> list[float]:
        """The last evaluated position's logits (n_vocab floats)."""
        p = _check(_lib.krafla_session_logits(self._s), None)
        return p[: self.model.n_vocab]

    @property
    def n_past(self) -> int:
        return _lib.krafla_session_n_past(self._s)

    @property
    def n_ctx(self) -> int:
        return _lib.krafla_session_n_ctx(self._s)

    def truncate(self, n: int) -> None:
        _check(_lib.krafla_session_truncate(self._s, n), -1)


class Model:
    """A loaded .mlb or GGUF model (krafla_model)."""

    def __init__(self, path: str, threads: int = 0):
        self._m = _check(_lib.krafla_model_load(os.fsencode(path), threads), None)
        self.n_vocab = _lib.krafla_model_n_vocab(self._m)
        self.n_ctx_train = _lib.krafla_model_n_ctx_train(self._m)
        self.arch = _lib.krafla_model_arch(self._m).decode()
        self.chat_template = _lib.krafla_model_chat_template(self._m).decode()
        self.bos = _lib.krafla_token_bos(self._m)
        self.eos = _lib.krafla_token_eos(self._m)
        self.threads = threads

    def close(self) -> None:
        if getattr(self, "_m", None):
            _lib.krafla_model_free(self._m)
            self._m = None

    def __del__(self):
        self.close()

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        n = _check(_lib.krafla_tokenize(self._m, data, len(data), add_special, None, 0), -1)
        buf = (ctypes.c_int32 * n)()
        _check(_lib.krafla_tokenize(self._m, data, len(data), add_special, buf, n), -1)
        return list(buf)

    def detokenize(self, ids: Sequence[int]) -> str:
        arr = _ids(ids)
        n = _check(_lib.krafla_detokenize(self._m, arr, len(ids), None, 0), -1)
        buf = ctypes.create_string_buffer(n + 1)
        _check(_lib.krafla_detokenize(self._m, arr, len(ids), buf, n + 1), -1)
        return buf.raw[:n].decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(_lib.krafla_token_is_eog(self._m, token))

    def session(self, n_ctx: int = 0) -> Session:
        return Session(self, n_ctx, self.threads)

    def apply_chat(
        self,
        messages: Sequence[dict],
        template: str | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The conversation rendered by a named template (None: the one the file suggests)."""
        msgs = (_ChatMessage * len(messages))(
            *[_ChatMessage(m["role"].encode(), m["content"].encode()) for m in messages]
        )
        name = template.encode() if template else None
        args = (self._m, name, msgs, len(messages), add_generation_prompt)
        n = _check(_lib.krafla_chat_apply(*args, None, 0), -1)
        buf = ctypes.create_string_buffer(n + 1)
        _check(_lib.krafla_chat_apply(*args, buf, n + 1), -1)
        return buf.raw[:n].decode("utf-8")

    def _stop_ids(self, template: str | None) -> set[int]:
        name = template.encode() if template else None
        n = _check(_lib.krafla_chat_stop_tokens(self._m, name, None, 0), -1)
        buf = (ctypes.c_int32 * n)()
        _check(_lib.krafla_chat_stop_tokens(self._m, name, buf, n), -1)
        return set(buf)

    def generate(
        self,
        prompt: str | Sequence[int],
        max_tokens: int = 128,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.0,
        repeat_penalty: float = 1.1,
        repeat_last_n: int = 64,
        seed: int = 0xC0FFEE,
        n_ctx: int = 0,
        stop_ids: set[int] | None = None,
        add_special: bool = True,
    ) -> Iterator[str]:
        """Yields the text of each generated token as it is sampled (pieces split inside a
        UTF-8 character are held back until complete); stops at an end-of-generation token
        (or one of stop_ids), after max_tokens, or when the context is full."""
        ids = self.tokenize(prompt, add_special) if isinstance(prompt, str) else list(prompt)
        params = SamplerParams(
            temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed
        )
        sampler = _check(_lib.krafla_sampler_new(ctypes.byref(params)), None)
        decoder = _check(_lib.krafla_decoder_new(self._m, 1), None)
        session = self.session(n_ctx)
        stops = stop_ids if stop_ids is not None else set()
        try:
            session.eval(ids)
            length = ctypes.c_int32()
            for _ in range(max_tokens):
                token = _check(_lib.krafla_sampler_sample(sampler, session._s), -1)
                if self.is_eog(token) or token in stops:
                    break
                piece = _check(_lib.krafla_decoder_push(decoder, token, ctypes.byref(length)), None)
                if length.value:
                    yield piece[: length.value].decode("utf-8")
                if session.n_past >= session.n_ctx:
                    break
                session.eval([token])
            piece = _check(_lib.krafla_decoder_flush(decoder, ctypes.byref(length)), None)
            if length.value:
                yield piece[: length.value].decode("utf-8")
        finally:
            session.close()
            _lib.krafla_decoder_free(decoder)
            _lib.krafla_sampler_free(sampler)

    def chat(self, messages: Sequence[dict], template: str | None = None, **sampling) -> str:
        """The assistant's reply to a conversation (role/content dicts), rendered with the
        template (None: the file's own) and generated until the template's end of turn."""
        text = self.apply_chat(messages, template)
        stops = self._stop_ids(template)
        return "".join(self.generate(text, stop_ids=stops, add_special=False, **sampling))
