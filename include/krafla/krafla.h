/* Krafla's C API (C11; C++ may include it too): load a model, tokenize, evaluate, sample, render
 * chat templates. Every binding (Python's python/krafla, or any FFI) stands on this header.
 *
 * Rules that hold for every call:
 * - No exception or abort crosses it. A call that fails returns NULL or -1 and sets a
 *   thread-local message, krafla_last_error(), naming what was wrong ("model.gguf: tensor
 *   'blk.0.attn_q' has ..."); a call that succeeds leaves the message as it was.
 * - Sizes into caller buffers: the call returns how many items the whole result has, which may
 *   exceed `cap`; nothing is written past `cap` (a text is not NUL-terminated when it fills
 *   the buffer exactly or is cut; it is when there is room). `buf`/`ids` may be NULL with cap 0
 *   to ask for the size first.
 * - Objects are freed by their own _free call (NULL is accepted). A session uses its model,
 *   which must outlive it. One object is used by one thread at a time; distinct sessions of one
 *   model may run on distinct threads.
 * docs/library.md has an example program and the build lines (pkg-config, CMake). */
#ifndef KRAFLA_KRAFLA_H
#define KRAFLA_KRAFLA_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(KRAFLA_SHARED_EXPORTS)
#define KRAFLA_API __declspec(dllexport)
#elif defined(__GNUC__)
#define KRAFLA_API __attribute__((visibility("default")))
#else
#define KRAFLA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct krafla_model krafla_model;
typedef struct krafla_session krafla_session;
typedef struct krafla_sampler krafla_sampler;
typedef struct krafla_decoder krafla_decoder;

/* The library's version ("0.1.0") and the kernel ISA it was built for ("avx512vnni"). */
KRAFLA_API const char* krafla_version(void);
KRAFLA_API const char* krafla_isa(void);
/* The message of the last failed call on this thread; "" when none has failed. */
KRAFLA_API const char* krafla_last_error(void);

/* ---- models ---- */

/* Loads a .mlb or GGUF file, packing its weights with n_threads threads (0: all cores).
 * NULL on error: a missing or corrupt file, an architecture this build does not run, or a CPU
 * without the instructions this build needs (the message names the missing feature). */
KRAFLA_API krafla_model* krafla_model_load(const char* path, int n_threads);
KRAFLA_API void krafla_model_free(krafla_model* model);
KRAFLA_API int32_t krafla_model_n_vocab(const krafla_model* model);
/* The context length the model was trained for (its config's max_ctx). */
KRAFLA_API int32_t krafla_model_n_ctx_train(const krafla_model* model);
/* The architecture (llama, qwen3_5, ...) and the chat template its file suggests ("" when it
 * suggests none); both valid while the model lives. */
KRAFLA_API const char* krafla_model_arch(const krafla_model* model);
KRAFLA_API const char* krafla_model_chat_template(const krafla_model* model);
/* -1 when the model has none. */
KRAFLA_API int32_t krafla_token_bos(const krafla_model* model);
KRAFLA_API int32_t krafla_token_eos(const krafla_model* model);
/* Whether `id` ends generation: one of the config's end-of-sequence ids or the tokenizer's. */
KRAFLA_API int krafla_token_is_eog(const krafla_model* model, int32_t id);

/* ---- tokens and text ---- */

/* Tokenizes len bytes of UTF-8 text; add_special adds what the tokenizer's post-processor adds
 * (BOS). Special tokens written in the text ("<|im_start|>") are recognised. Returns the number
 * of ids (may exceed cap; -1 on error). */
KRAFLA_API int32_t krafla_tokenize(const krafla_model* model, const char* text, size_t len,
                                   int add_special, int32_t* ids, int32_t cap);
/* The text of n ids (special tokens written out). Returns its length in bytes (may exceed cap;
 * -1 on an id outside the vocabulary). */
KRAFLA_API int32_t krafla_detokenize(const krafla_model* model, const int32_t* ids, int32_t n,
                                     char* buf, int32_t cap);

/* Text token by token while generating: push returns the text that became complete (a UTF-8
 * character split across tokens is held back until its last byte), valid until the next call
 * on the decoder, and its length in *len. NULL (and -1 in *len) on an id outside the
 * vocabulary. flush returns what is still held back. skip_special drops special tokens. */
KRAFLA_API krafla_decoder* krafla_decoder_new(const krafla_model* model, int skip_special);
KRAFLA_API void krafla_decoder_free(krafla_decoder* decoder);
KRAFLA_API const char* krafla_decoder_push(krafla_decoder* decoder, int32_t id, int32_t* len);
KRAFLA_API const char* krafla_decoder_flush(krafla_decoder* decoder, int32_t* len);

/* ---- sessions: the KV cache and the forward pass ---- */

/* A session of n_ctx positions (0: the model's trained context, capped at 4096), running on
 * n_threads threads (0: all cores). NULL on error. */
KRAFLA_API krafla_session* krafla_session_new(krafla_model* model, int32_t n_ctx, int n_threads);
KRAFLA_API void krafla_session_free(krafla_session* session);
/* Appends n tokens at positions n_past .. n_past+n-1. 0 on success; -1 on an id outside the
 * vocabulary or when they would not fit the context, and nothing is evaluated then. */
KRAFLA_API int krafla_session_eval(krafla_session* session, const int32_t* ids, int32_t n);
/* The last evaluated position's n_vocab logits, valid until the next eval or truncate; NULL
 * before the first eval. */
KRAFLA_API const float* krafla_session_logits(krafla_session* session);
KRAFLA_API int32_t krafla_session_n_past(const krafla_session* session);
KRAFLA_API int32_t krafla_session_n_ctx(const krafla_session* session);
/* Drops the tokens past n (0 <= n <= n_past). -1 on error: models with DeltaNet layers
 * (Qwen3.5) can only truncate to 0. */
KRAFLA_API int krafla_session_truncate(krafla_session* session, int32_t n);

/* ---- sampling (the order and rules of include/krafla/sampler.h) ---- */

typedef struct krafla_sampler_params {
  float temperature;     /* <= 0: greedy (the lowest id among equal logits) */
  int32_t top_k;         /* <= 0: the whole vocabulary */
  float top_p;           /* >= 1: off */
  float min_p;           /* 0: off */
  float repeat_penalty;  /* 1: off */
  int32_t repeat_last_n; /* tokens the penalty looks back at; < 0: all */
  uint64_t seed;
} krafla_sampler_params;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0, repeat_penalty 1.1, repeat_last_n 64. */
KRAFLA_API krafla_sampler_params krafla_sampler_default_params(void);
/* NULL on a parameter out of range: a NaN or infinity, top_p or min_p outside 0..1, a
 * repeat_penalty that is not positive. */
KRAFLA_API krafla_sampler* krafla_sampler_new(const krafla_sampler_params* params);
KRAFLA_API void krafla_sampler_free(krafla_sampler* sampler);
/* Draws the next token from the session's last logits, the session's tokens serving as the
 * repetition penalty's history. -1 on error (no logits yet, NaN logits). */
KRAFLA_API int32_t krafla_sampler_sample(krafla_sampler* sampler, krafla_session* session);

/* ---- chat templates ---- */

typedef struct krafla_chat_message {
  const char* role; /* "system", "user", "assistant" or "tool" */
  const char* content;
} krafla_chat_message;

/* Renders n messages with the named template ("chatml", "llama3", "qwen3.5", ...; NULL or
 * "auto": the one the model's file suggests), ending with the assistant's header when
 * add_generation_prompt. Returns the text's length (may exceed cap; -1 on an unknown template,
 * a role it does not take, or "auto" on a model that suggests none). model may be NULL when a
 * name is given. */
KRAFLA_API int32_t krafla_chat_apply(const krafla_model* model, const char* template_name,
                                     const krafla_chat_message* messages, size_t n,
                                     int add_generation_prompt, char* buf, int32_t cap);
/* The ids that end an assistant turn under the template (its end-of-turn tokens and the
 * model's end-of-sequence ids). Returns their number (may exceed cap; -1 on error). */
KRAFLA_API int32_t krafla_chat_stop_tokens(const krafla_model* model, const char* template_name,
                                           int32_t* ids, int32_t cap);

#ifdef __cplusplus
}
#endif

#endif /* KRAFLA_KRAFLA_H */
