/* The C API from C11, built only from the installed header and pkg-config's flags
 * (tests/capi/run.sh). Usage: capi_test MODEL IDS OUT
 *   IDS: comma-separated prompt ids; OUT: every position's logits, float32 [n, n_vocab], from
 *   evaluating the prompt one token at a time (run.sh compares them with the numpy reference).
 * Everything else is asserted here; the first failure prints "FAIL: ..." and exits 1. */
#include <krafla/krafla.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                           \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "FAIL line %d: ", __LINE__);                 \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, " [last error: %s]\n", krafla_last_error()); \
      failures++;                                                  \
    }                                                              \
  } while (0)

static int32_t parse_ids(const char* s, int32_t* ids, int32_t cap) {
  int32_t n = 0;
  while (*s && n < cap) {
    char* end;
    ids[n++] = (int32_t)strtol(s, &end, 10);
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

static int32_t argmax(const float* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

/* Text → ids → text, with the size contract: a short buffer is never written past. */
static void check_tokens(const krafla_model* m) {
  const char* text = "The jury said it did find that many of Atlanta's registration practices.";
  const size_t len = strlen(text);
  int32_t n = krafla_tokenize(m, text, len, 0, NULL, 0);
  CHECK(n > 3, "tokenize asked for its size: %d", n);
  int32_t ids[256], few[3] = {-7, -7, -7};
  CHECK(krafla_tokenize(m, text, len, 0, few, 2) == n, "tokenize into 2 slots returns the count");
  CHECK(few[2] == -7, "tokenize wrote past its capacity");
  CHECK(krafla_tokenize(m, text, len, 0, ids, 256) == n, "tokenize");
  CHECK(few[0] == ids[0] && few[1] == ids[1], "the 2 ids written are the first two");
  char buf[512];
  const int32_t bytes = krafla_detokenize(m, ids, n, buf, sizeof buf);
  CHECK(bytes == (int32_t)len && memcmp(buf, text, len) == 0 && buf[len] == '\0',
        "detokenize(tokenize(text)) == text: got %d bytes '%.*s'", bytes, bytes, buf);
  char tiny[5] = "xxxx";
  CHECK(krafla_detokenize(m, ids, n, tiny, 3) == bytes, "detokenize into 3 bytes: the length");
  CHECK(memcmp(tiny, text, 3) == 0 && tiny[3] == 'x', "detokenize wrote past its capacity");
  /* the stream decoder gives the same text piece by piece */
  krafla_decoder* d = krafla_decoder_new(m, 0);
  char joined[512] = "";
  for (int32_t i = 0; i < n; ++i) {
    int32_t l = 0;
    const char* piece = krafla_decoder_push(d, ids[i], &l);
    CHECK(piece && l >= 0, "decoder_push");
    if (piece) strncat(joined, piece, (size_t)l);
  }
  int32_t l = 0;
  strncat(joined, krafla_decoder_flush(d, &l), (size_t)l);
  CHECK(strcmp(joined, text) == 0, "decoder pieces join to the text: '%s'", joined);
  CHECK(krafla_decoder_push(d, 1 << 30, &l) == NULL && l == -1, "decoder_push of a bad id");
  krafla_decoder_free(d);
  CHECK(krafla_detokenize(m, (const int32_t[]){1 << 30}, 1, buf, sizeof buf) == -1,
        "detokenize of a bad id");
  CHECK(strstr(krafla_last_error(), "vocabulary") != NULL, "the error names the vocabulary");
}

/* Greedy sampling is the argmax; a seeded sampler repeats itself; bad parameters are refused. */
static void check_sampler(krafla_session* s, const float* logits, int32_t n_vocab) {
  krafla_sampler_params p = krafla_sampler_default_params();
  CHECK(p.top_k == 40 && fabsf(p.temperature - 0.8f) < 1e-6f, "default params");
  p.temperature = 0;
  krafla_sampler* greedy = krafla_sampler_new(&p);
  CHECK(krafla_sampler_sample(greedy, s) == argmax(logits, n_vocab), "greedy is the argmax");
  krafla_sampler_free(greedy);
  p = krafla_sampler_default_params();
  p.seed = 42;
  krafla_sampler *a = krafla_sampler_new(&p), *b = krafla_sampler_new(&p);
  for (int i = 0; i < 5; ++i)
    CHECK(krafla_sampler_sample(a, s) == krafla_sampler_sample(b, s), "same seed, same draw");
  krafla_sampler_free(a);
  krafla_sampler_free(b);
  p.top_p = NAN;
  CHECK(krafla_sampler_new(&p) == NULL && strstr(krafla_last_error(), "top_p"),
        "a NaN top_p is refused by name");
}

static void check_chat(const krafla_model* m) {
  const krafla_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
  const char* want =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\n";
  char buf[256];
  const int32_t n = krafla_chat_apply(m, "chatml", msgs, 2, 1, buf, sizeof buf);
  CHECK(n == (int32_t)strlen(want) && strcmp(buf, want) == 0, "chatml rendering: '%s'", buf);
  CHECK(krafla_chat_apply(NULL, "chatml", msgs, 2, 1, NULL, 0) == n, "size asked first");
  CHECK(krafla_chat_apply(m, "no-such-template", msgs, 2, 1, buf, sizeof buf) == -1,
        "an unknown template");
  CHECK(strstr(krafla_last_error(), "no-such-template") != NULL, "the error names it");
  int32_t stops[16];
  const int32_t k = krafla_chat_stop_tokens(m, "chatml", stops, 16);
  CHECK(k >= 1, "chatml has stop tokens");
  for (int32_t i = 0; i < k && i < 16; ++i) {
    char piece[64];
    krafla_detokenize(m, &stops[i], 1, piece, sizeof piece);
    if (strcmp(piece, "<|im_end|>") == 0) return;
  }
  /* a vocabulary without <|im_end|> (SentencePiece models) stops on its EOS only */
  CHECK(krafla_token_is_eog(m, stops[0]), "stop tokens end generation");
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: capi_test MODEL IDS OUT\n");
    return 2;
  }
  CHECK(strlen(krafla_version()) > 0 && strlen(krafla_isa()) > 0, "version and ISA");
  CHECK(strcmp(krafla_last_error(), "") == 0, "no error before any call");
  CHECK(krafla_model_load("/nonexistent/model.gguf", 1) == NULL, "a missing file");
  CHECK(strstr(krafla_last_error(), "/nonexistent/model.gguf") != NULL, "the error names it");

  krafla_model* m = krafla_model_load(argv[1], 2);
  if (!m) {
    fprintf(stderr, "FAIL: load %s: %s\n", argv[1], krafla_last_error());
    return 1;
  }
  const int32_t n_vocab = krafla_model_n_vocab(m);
  CHECK(n_vocab > 0 && krafla_model_n_ctx_train(m) > 0, "model sizes");
  CHECK(strlen(krafla_model_arch(m)) > 0, "arch");
  check_tokens(m);
  check_chat(m);

  int32_t ids[1024];
  const int32_t n = parse_ids(argv[2], ids, 1024);
  krafla_session* s = krafla_session_new(m, 0, 2);
  CHECK(s != NULL, "session");
  CHECK(krafla_session_logits(s) == NULL, "no logits before an eval");
  float* all = malloc(sizeof(float) * (size_t)n * (size_t)n_vocab);
  for (int32_t i = 0; i < n; ++i) {
    CHECK(krafla_session_eval(s, &ids[i], 1) == 0, "eval token %d", i);
    memcpy(all + (size_t)i * n_vocab, krafla_session_logits(s), sizeof(float) * n_vocab);
  }
  CHECK(krafla_session_n_past(s) == n, "n_past after the prompt");
  const int32_t bad[2] = {ids[0], n_vocab + 5};
  CHECK(krafla_session_eval(s, bad, 2) == -1, "an id outside the vocabulary");
  CHECK(strstr(krafla_last_error(), "vocabulary") != NULL, "the error names the vocabulary");
  CHECK(krafla_session_n_past(s) == n, "nothing evaluated after a refused eval");
  check_sampler(s, all + (size_t)(n - 1) * n_vocab, n_vocab);

  /* the whole prompt again in one eval: the same last logits as token by token, up to the
   * batched path's rounding; after truncate(0), bit for bit what the first batch gave */
  CHECK(krafla_session_truncate(s, 0) == 0 && krafla_session_n_past(s) == 0, "truncate to 0");
  CHECK(krafla_session_eval(s, ids, n) == 0, "eval of the whole prompt");
  float* batch = malloc(sizeof(float) * (size_t)n_vocab);
  memcpy(batch, krafla_session_logits(s), sizeof(float) * n_vocab);
  CHECK(argmax(batch, n_vocab) == argmax(all + (size_t)(n - 1) * n_vocab, n_vocab),
        "batched and token-by-token prefill agree on the argmax");
  krafla_session_truncate(s, 0);
  krafla_session_eval(s, ids, n);
  CHECK(memcmp(batch, krafla_session_logits(s), sizeof(float) * n_vocab) == 0,
        "the same prompt gives the same bits");
  krafla_session* tiny = krafla_session_new(m, 4, 1);
  CHECK(krafla_session_eval(tiny, ids, 5) == -1 && krafla_session_n_past(tiny) == 0,
        "5 tokens in a 4-token context are refused whole");
  krafla_session_free(tiny);

  FILE* f = fopen(argv[3], "wb");
  CHECK(f && fwrite(all, sizeof(float), (size_t)n * n_vocab, f) == (size_t)n * n_vocab,
        "writing %s", argv[3]);
  if (f) fclose(f);
  free(all);
  free(batch);
  krafla_session_free(s);
  krafla_model_free(m);
  krafla_model_free(NULL);
  if (failures) return 1;
  printf("capi_test: %d positions, %d logits each: all checks passed\n", n, n_vocab);
  return 0;
}
