// include/krafla/krafla.h over the C++ library: each call catches everything, turns it into
// the thread-local last error and a NULL / -1 return.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "krafla/chat.h"
#include "krafla/error.h"
#include "krafla/generate.h"
#include "krafla/krafla.h"
#include "krafla/model.h"
#include "krafla/sampler.h"
#include "krafla/session.h"

struct krafla_model {
  std::unique_ptr<krafla::Model> m;
  std::vector<int32_t> eog;  // stop_ids_for(*m, ""), sorted: krafla_token_is_eog per token
};
struct krafla_session {
  std::unique_ptr<krafla::Session> s;
  bool has_logits = false;
};
struct krafla_sampler {
  krafla::Sampler s;
};
struct krafla_decoder {
  krafla::Tokenizer::StreamDecoder d;
  std::string text;  // what the last push or flush returned
};

namespace {

thread_local std::string g_last_error;

// Runs f; an exception becomes the last error and `fail` is returned.
template <typename R, typename F>
R guarded(R fail, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    g_last_error = "out of memory";
  } catch (const std::exception& e) {
    g_last_error = e.what();
  } catch (...) {
    g_last_error = "unknown error";
  }
  return fail;
}

void need(const void* p, const char* what) {
  if (!p) throw krafla::Error(fmt::format("{} is NULL", what));
}

void need_cap(const void* buf, int32_t cap, const char* what) {
  if (cap < 0) throw krafla::Error(fmt::format("{}: capacity {} is negative", what, cap));
  if (cap > 0 && !buf) throw krafla::Error(fmt::format("{} is NULL with capacity {}", what, cap));
}

// The size contract of krafla.h: copies what fits, NUL-terminates when there is room.
int32_t copy_out(const std::string& s, char* buf, int32_t cap) {
  if (s.size() > size_t(INT32_MAX)) throw krafla::Error("text longer than 2 GiB");
  if (cap > 0) {
    const size_t n = std::min(s.size(), size_t(cap));
    std::memcpy(buf, s.data(), n);
    if (n < size_t(cap)) buf[n] = '\0';
  }
  return int32_t(s.size());
}

int32_t copy_out(const std::vector<int32_t>& v, int32_t* ids, int32_t cap) {
  if (cap > 0) std::copy_n(v.begin(), std::min(v.size(), size_t(cap)), ids);
  return int32_t(v.size());
}

// "auto" and NULL: the template the model's file suggests.
std::string template_name(const krafla_model* model, const char* name) {
  if (name && std::strcmp(name, "auto") != 0) return name;
  if (!model) throw krafla::Error("chat template 'auto' needs a model");
  const std::string& suggested = model->m->config().chat_template;
  if (suggested.empty())
    throw krafla::Error(
        fmt::format("{}: the file suggests no chat template; name one", model->m->path()));
  return suggested;
}

}  // namespace

extern "C" {

const char* krafla_version(void) { return KRAFLA_VERSION; }
const char* krafla_isa(void) { return krafla::kernels::isa_name(); }
const char* krafla_last_error(void) { return g_last_error.c_str(); }

krafla_model* krafla_model_load(const char* path, int n_threads) {
  return guarded<krafla_model*>(nullptr, [&] {
    need(path, "path");
    if (n_threads < 0) throw krafla::Error(fmt::format("n_threads {} is negative", n_threads));
    auto m = krafla::Model::load(path, n_threads);
    auto eog = krafla::stop_ids_for(*m, "");
    return new krafla_model{std::move(m), std::move(eog)};
  });
}

void krafla_model_free(krafla_model* model) { delete model; }

int32_t krafla_model_n_vocab(const krafla_model* model) {
  return guarded<int32_t>(-1, [&] {
    need(model, "model");
    return int32_t(model->m->config().n_vocab);
  });
}

int32_t krafla_model_n_ctx_train(const krafla_model* model) {
  return guarded<int32_t>(-1, [&] {
    need(model, "model");
    return int32_t(model->m->config().max_ctx);
  });
}

const char* krafla_model_arch(const krafla_model* model) {
  return guarded<const char*>(nullptr, [&] {
    need(model, "model");
    return model->m->config().arch.c_str();
  });
}

const char* krafla_model_chat_template(const krafla_model* model) {
  return guarded<const char*>(nullptr, [&] {
    need(model, "model");
    return model->m->config().chat_template.c_str();
  });
}

int32_t krafla_token_bos(const krafla_model* model) {
  return guarded<int32_t>(-1, [&] {
    need(model, "model");
    const int32_t bos = model->m->config().bos_id;
    return bos >= 0 ? bos : model->m->tokenizer().bos_id();
  });
}

int32_t krafla_token_eos(const krafla_model* model) {
  return guarded<int32_t>(-1, [&] {
    need(model, "model");
    const auto& eos = model->m->config().eos_ids;
    return eos.empty() ? model->m->tokenizer().eos_id() : int32_t(eos.front());
  });
}

int krafla_token_is_eog(const krafla_model* model, int32_t id) {
  return guarded<int>(0, [&] {
    need(model, "model");
    return int(std::binary_search(model->eog.begin(), model->eog.end(), id));
  });
}

int32_t krafla_tokenize(const krafla_model* model, const char* text, size_t len, int add_special,
                        int32_t* ids, int32_t cap) {
  return guarded<int32_t>(-1, [&] {
    need(model, "model");
    if (len) need(text, "text");
    need_cap(ids, cap, "ids");
    const auto v =
        model->m->tokenizer().encode(std::string_view(text ? text : "", len), add_special != 0);
    return copy_out(v, ids, cap);
  });
}

int32_t krafla_detokenize(const krafla_model* model, const int32_t* ids, int32_t n, char* buf,
                          int32_t cap) {
  return guarded<int32_t>(-1, [&] {
    need(model, "model");
    if (n < 0) throw krafla::Error(fmt::format("n {} is negative", n));
    if (n) need(ids, "ids");
    need_cap(buf, cap, "buf");
    return copy_out(model->m->tokenizer().decode({ids, size_t(n)}), buf, cap);
  });
}

krafla_decoder* krafla_decoder_new(const krafla_model* model, int skip_special) {
  return guarded<krafla_decoder*>(nullptr, [&] {
    need(model, "model");
    return new krafla_decoder{
        krafla::Tokenizer::StreamDecoder(model->m->tokenizer(), skip_special != 0), {}};
  });
}

void krafla_decoder_free(krafla_decoder* decoder) { delete decoder; }

const char* krafla_decoder_push(krafla_decoder* decoder, int32_t id, int32_t* len) {
  if (len) *len = -1;
  return guarded<const char*>(nullptr, [&] {
    need(decoder, "decoder");
    decoder->text = decoder->d.push(id);
    if (len) *len = int32_t(decoder->text.size());
    return decoder->text.c_str();
  });
}

const char* krafla_decoder_flush(krafla_decoder* decoder, int32_t* len) {
  if (len) *len = -1;
  return guarded<const char*>(nullptr, [&] {
    need(decoder, "decoder");
    decoder->text = decoder->d.flush();
    if (len) *len = int32_t(decoder->text.size());
    return decoder->text.c_str();
  });
}

krafla_session* krafla_session_new(krafla_model* model, int32_t n_ctx, int n_threads) {
  return guarded<krafla_session*>(nullptr, [&] {
    need(model, "model");
    if (n_ctx < 0) throw krafla::Error(fmt::format("n_ctx {} is negative", n_ctx));
    if (n_threads < 0) throw krafla::Error(fmt::format("n_threads {} is negative", n_threads));
    krafla::SessionOptions opts;
    opts.n_ctx = n_ctx;
    opts.n_threads = n_threads;
    return new krafla_session{std::make_unique<krafla::Session>(*model->m, opts)};
  });
}

void krafla_session_free(krafla_session* session) { delete session; }

int krafla_session_eval(krafla_session* session, const int32_t* ids, int32_t n) {
  return guarded<int>(-1, [&] {
    need(session, "session");
    if (n < 0) throw krafla::Error(fmt::format("n {} is negative", n));
    if (n == 0) return 0;
    need(ids, "ids");
    session->s->eval({ids, size_t(n)});
    session->has_logits = true;
    return 0;
  });
}

const float* krafla_session_logits(krafla_session* session) {
  return guarded<const float*>(nullptr, [&]() -> const float* {
    need(session, "session");
    if (!session->has_logits) throw krafla::Error("no logits: nothing evaluated yet");
    return session->s->logits().data();
  });
}

int32_t krafla_session_n_past(const krafla_session* session) {
  return guarded<int32_t>(-1, [&] {
    need(session, "session");
    return int32_t(session->s->n_past());
  });
}

int32_t krafla_session_n_ctx(const krafla_session* session) {
  return guarded<int32_t>(-1, [&] {
    need(session, "session");
    return int32_t(session->s->n_ctx());
  });
}

int krafla_session_truncate(krafla_session* session, int32_t n) {
  return guarded<int>(-1, [&] {
    need(session, "session");
    if (n < 0 || n > session->s->n_past())
      throw krafla::Error(
          fmt::format("truncate to {}: outside 0..n_past ({})", n, session->s->n_past()));
    const int32_t before = session->s->n_past();
    session->s->truncate(n);
    if (n < before) session->has_logits = false;  // they were a dropped position's
    return 0;
  });
}

krafla_sampler_params krafla_sampler_default_params(void) {
  const krafla::SamplerParams d;
  return {d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed};
}

krafla_sampler* krafla_sampler_new(const krafla_sampler_params* params) {
  return guarded<krafla_sampler*>(nullptr, [&] {
    need(params, "params");
    const krafla_sampler_params& p = *params;
    const auto check = [](bool ok, const char* field, double v) {
      if (!ok)
        throw krafla::Error(fmt::format("sampler parameter {} = {} is out of range", field, v));
    };
    check(std::isfinite(p.temperature), "temperature", p.temperature);
    check(p.top_p >= 0 && p.top_p <= 1, "top_p", p.top_p);
    check(p.min_p >= 0 && p.min_p <= 1, "min_p", p.min_p);
    check(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0, "repeat_penalty",
          p.repeat_penalty);
    return new krafla_sampler{krafla::Sampler(krafla::SamplerParams{
        p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n, p.seed})};
  });
}

void krafla_sampler_free(krafla_sampler* sampler) { delete sampler; }

int32_t krafla_sampler_sample(krafla_sampler* sampler, krafla_session* session) {
  return guarded<int32_t>(-1, [&] {
    need(sampler, "sampler");
    need(session, "session");
    if (!session->has_logits) throw krafla::Error("no logits: nothing evaluated yet");
    return sampler->s.sample(session->s->logits(), session->s->history());
  });
}

int32_t krafla_chat_apply(const krafla_model* model, const char* template_name_or_auto,
                          const krafla_chat_message* messages, size_t n, int add_generation_prompt,
                          char* buf, int32_t cap) {
  return guarded<int32_t>(-1, [&] {
    if (n) need(messages, "messages");
    need_cap(buf, cap, "buf");
    const std::string name = template_name(model, template_name_or_auto);
    std::vector<krafla::ChatMessage> msgs;
    for (size_t i = 0; i < n; ++i) {
      if (!messages[i].role || !messages[i].content)
        throw krafla::Error(fmt::format("message {}: role or content is NULL", i));
      msgs.push_back({messages[i].role, messages[i].content});
    }
    return copy_out(krafla::chat_template(name).render(msgs, add_generation_prompt != 0), buf, cap);
  });
}

int32_t krafla_chat_stop_tokens(const krafla_model* model, const char* template_name_or_auto,
                                int32_t* ids, int32_t cap) {
  return guarded<int32_t>(-1, [&] {
    need(model, "model");
    need_cap(ids, cap, "ids");
    const std::string name = template_name(model, template_name_or_auto);
    return copy_out(krafla::stop_ids_for(*model->m, name), ids, cap);
  });
}

}  // extern "C"
