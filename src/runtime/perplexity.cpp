#include "krafla/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "krafla/error.h"
#include "krafla/path.h"

namespace krafla {

double PerplexityResult::ppl() const { return n_scored ? std::exp(sum_nll / n_scored) : 0.0; }

namespace {

// Standard error of the mean of values whose sum and sum of squares are given.
double mean_stderr(double sum, double sum2, int64_t n) {
  if (n < 2) return 0.0;
  const double mean = sum / n, var = sum2 / n - mean * mean;
  return var > 0 ? std::sqrt(var / double(n - 1)) : 0.0;
}

}  // namespace

double PerplexityResult::ppl_stderr() const {
  return ppl() * mean_stderr(sum_nll, sum_nll2, n_scored);
}
double PerplexityResult::ppl_base() const {
  return n_scored ? std::exp(sum_nll_base / n_scored) : 0.0;
}
double PerplexityResult::kl_mean() const {
  double s = 0;
  for (float v : kl) s += v;
  return kl.empty() ? 0.0 : s / double(kl.size());
}
double PerplexityResult::kl_stderr() const {
  double s = 0, s2 = 0;
  for (float v : kl) s += v, s2 += double(v) * v;
  return mean_stderr(s, s2, int64_t(kl.size()));
}
double PerplexityResult::kl_quantile(double q) const {
  if (kl.empty()) return 0.0;
  std::vector<float> v(kl);
  const size_t i = std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(i), v.end());
  return v[i];
}
double PerplexityResult::top1_agreement() const {
  return n_scored ? double(same_top) / double(n_scored) : 0.0;
}

namespace {

// log-sum-exp of a row, in double.
double log_sum_exp(std::span<const float> x) {
  const float mx = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (float v : x) s += std::exp(double(v) - mx);
  return mx + std::log(s);
}

}  // namespace

double token_nll(std::span<const float> logits, int32_t target) {
  return log_sum_exp(logits) - logits[size_t(target)];
}

namespace {

// The base file (docs/perplexity.md): a header, then per chunk its n_ctx tokens (as fed, BOS
// included) and, per scored position, the log-probabilities of the whole vocabulary quantized
// to 16 bits over [lo, lo + 65535·step]; lo is the row's lowest log-probability, or 24 below
// its highest when the row spans more (lower ones read as lo: their mass is < n_vocab·e^-24).
constexpr char kPplMagic[8] = {'K', 'R', 'A', 'F', 'L', 'A', 'L', 'P'};
constexpr uint32_t kPplVersion = 1;
constexpr double kRange = 24.0;

struct BaseHeader {
  char magic[8];
  uint32_t version, n_vocab, n_ctx, first, n_chunks, reserved;
};
static_assert(sizeof(BaseHeader) == 32);

// One quantized row: lp_i ≈ lo + q_i · step.
struct QuantRow {
  float lo = 0, step = 0;
  std::vector<uint16_t> q;
  float lp(size_t i) const { return lo + float(q[i]) * step; }
  size_t argmax() const { return size_t(std::max_element(q.begin(), q.end()) - q.begin()); }
};

// lse: log_sum_exp(logits), computed once per row by the caller.
void quantize_log_probs(std::span<const float> logits, double lse, QuantRow& r) {
  const auto [mn, mx] = std::minmax_element(logits.begin(), logits.end());
  const double hi = *mx - lse, lo = std::max(double(*mn) - lse, hi - kRange);
  r.lo = float(lo);
  r.step = float((hi - lo) / 65535.0);
  r.q.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const double v = r.step > 0 ? (logits[i] - lse - lo) / r.step : 65535.0;
    r.q[i] = uint16_t(std::clamp(std::lround(v), 0L, 65535L));
  }
}

class BaseWriter {
 public:
  BaseWriter(const std::string& path, const BaseHeader& h) : path_(path), tmp_(path + ".tmp") {
    f_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!f_) throw Error(fmt::format("{}: cannot write the KL base file", tmp_));
    header_ = h;
    write(&header_, sizeof header_);
  }
  ~BaseWriter() {
    if (f_.is_open()) {  // not committed: an error or an early stop
      f_.close();
      std::error_code ec;
      std::filesystem::remove(fs_path(tmp_), ec);
    }
  }
  void chunk_tokens(std::span<const int32_t> t) { write(t.data(), t.size_bytes()); }
  void row(const QuantRow& r) {
    write(&r.lo, 4), write(&r.step, 4);
    write(r.q.data(), r.q.size() * 2);
  }
  // The chunk count goes into the header; the file replaces `path` only now.
  void commit(int n_chunks) {
    header_.n_chunks = uint32_t(n_chunks);
    f_.seekp(0);
    write(&header_, sizeof header_);
    f_.close();
    if (f_.fail()) throw Error(fmt::format("{}: writing the KL base file failed", tmp_));
    std::filesystem::rename(fs_path(tmp_), fs_path(path_));
  }

 private:
  void write(const void* p, size_t n) {
    f_.write(static_cast<const char*>(p), std::streamsize(n));
    if (!f_) throw Error(fmt::format("{}: writing the KL base file failed (disk full?)", tmp_));
  }
  std::string path_, tmp_;
  std::ofstream f_;
  BaseHeader header_{};
};

class BaseReader {
 public:
  BaseReader(const std::string& path, int n_vocab, const PerplexityOptions& o) : path_(path) {
    f_.open(path, std::ios::binary);
    if (!f_) throw Error(fmt::format("{}: cannot open the KL base file", path));
    read(&h_, sizeof h_, "header");
    if (std::memcmp(h_.magic, kPplMagic, 8) != 0)
      throw Error(fmt::format("{}: not a KL base file (bad magic)", path));
    if (h_.version != kPplVersion)
      throw Error(fmt::format("{}: KL base file version {} (this build reads {})", path, h_.version,
                              kPplVersion));
    if (h_.n_vocab != uint32_t(n_vocab))
      throw Error(fmt::format("{}: made with a vocabulary of {} tokens, this model has {}", path,
                              h_.n_vocab, n_vocab));
    if (h_.n_ctx != uint32_t(o.n_ctx) || h_.first != uint32_t(o.first))
      throw Error(fmt::format(
          "{}: made with chunks of {} tokens scored from position {}; this run uses {} from {} "
          "(pass the same --ctx and --ppl-scoring)",
          path, h_.n_ctx, h_.first, o.n_ctx, o.first));
    // A cut file is refused here, before any chunk is scored.
    const uint64_t rows = h_.n_ctx - 1 - h_.first;
    const uint64_t chunk = uint64_t(h_.n_ctx) * 4 + rows * (8 + 2 * uint64_t(h_.n_vocab));
    const uint64_t want = sizeof h_ + uint64_t(h_.n_chunks) * chunk;
    const uint64_t have = std::filesystem::file_size(fs_path(path));
    if (have != want)
      throw Error(fmt::format("{}: {} KL base file ({} bytes, its header promises {})", path,
                              have < want ? "truncated" : "overlong", have, want));
  }
  int n_chunks() const { return int(h_.n_chunks); }
  void chunk_tokens(int chunk, std::span<const int32_t> expected) {
    std::vector<int32_t> t(expected.size());
    read(t.data(), t.size() * 4, fmt::format("chunk {}'s tokens", chunk + 1));
    if (!std::equal(t.begin(), t.end(), expected.begin()))
      throw Error(fmt::format(
          "{}: chunk {} holds other tokens than this text's (another text or tokenizer?)", path_,
          chunk + 1));
  }
  void row(QuantRow& r) {
    read(&r.lo, 4, "a row"), read(&r.step, 4, "a row");
    r.q.resize(h_.n_vocab);
    read(r.q.data(), r.q.size() * 2, "a row");
  }

 private:
  void read(void* p, size_t n, const std::string& what) {
    f_.read(static_cast<char*>(p), std::streamsize(n));
    if (!f_) throw Error(fmt::format("{}: truncated KL base file (reading {})", path_, what));
  }
  std::string path_;
  std::ifstream f_;
  BaseHeader h_{};
};

// KL(base || this) of one prediction (lse: log_sum_exp(logits)); the base's NLL of the target
// goes to *nll_base.
double kl_divergence(const QuantRow& base, std::span<const float> logits, double lse,
                     int32_t target, double* nll_base) {
  double kl = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double lb = base.lp(i);
    kl += std::exp(lb) * (lb - (logits[i] - lse));
  }
  *nll_base = -double(base.lp(size_t(target)));
  return kl;
}

}  // namespace

void check_perplexity(size_t n_tokens, int n_vocab, int session_ctx, const PerplexityOptions& o) {
  if (o.n_ctx < 2)
    throw Error(fmt::format("perplexity: --ctx {} is too small (at least 2)", o.n_ctx));
  if (o.first < 0 || o.first > o.n_ctx - 2)
    throw Error(fmt::format("perplexity: the first scored position {} is outside 0..{}", o.first,
                            o.n_ctx - 2));
  if (o.n_ctx > session_ctx)
    throw Error(fmt::format("perplexity: chunks of {} tokens exceed the session's context of {}",
                            o.n_ctx, session_ctx));
  if (n_tokens / size_t(o.n_ctx) < 2)
    throw Error(fmt::format(
        "perplexity: the text has {} tokens; chunks of {} need at least {} (two chunks)", n_tokens,
        o.n_ctx, 2 * o.n_ctx));
  if (!o.kl_base.empty()) BaseReader(o.kl_base, n_vocab, o);  // header and size
}

PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens,
                            const PerplexityOptions& o,
                            const std::function<bool(const PerplexityResult&)>& on_chunk) {
  const int V = session.model().config().n_vocab;
  check_perplexity(tokens.size(), V, session.n_ctx(), o);
  const int64_t n_chunks_max = int64_t(tokens.size()) / o.n_ctx;
  PerplexityResult r;
  r.n_chunks_total =
      int(o.max_chunks < 0 ? n_chunks_max : std::min<int64_t>(o.max_chunks, n_chunks_max));

  std::unique_ptr<BaseReader> base;
  if (!o.kl_base.empty()) {
    base = std::make_unique<BaseReader>(o.kl_base, V, o);
    if (base->n_chunks() < r.n_chunks_total) r.n_chunks_total = base->n_chunks();
    r.has_base = true;
  }
  std::unique_ptr<BaseWriter> writer;
  if (!o.save_base.empty()) {
    BaseHeader h{};
    std::memcpy(h.magic, kPplMagic, 8);
    h.version = kPplVersion, h.n_vocab = uint32_t(V), h.n_ctx = uint32_t(o.n_ctx);
    h.first = uint32_t(o.first);
    writer = std::make_unique<BaseWriter>(o.save_base, h);
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> chunk(size_t(o.n_ctx));
  std::vector<float> logits;
  QuantRow row;
  const int n_batch = std::max(1, o.n_batch);
  for (int c = 0; c < r.n_chunks_total; ++c) {
    std::copy_n(tokens.begin() + int64_t(c) * o.n_ctx, o.n_ctx, chunk.begin());
    if (o.bos_id >= 0) chunk[0] = o.bos_id;
    if (base) base->chunk_tokens(c, chunk);
    if (writer) writer->chunk_tokens(chunk);
    session.truncate(0);
    for (int b = 0; b < o.n_ctx - 1; b += n_batch) {  // the last token predicts nothing
      const int n = std::min(n_batch, o.n_ctx - b);
      session.eval(std::span<const int32_t>(chunk).subspan(size_t(b), size_t(n)), &logits);
      for (int j = std::max(b, o.first); j < std::min(b + n, o.n_ctx - 1); ++j) {
        const std::span<const float> lg(logits.data() + size_t(j - b) * V, size_t(V));
        const int32_t target = chunk[size_t(j) + 1];
        const double lse = log_sum_exp(lg);  // once per row: the NLL, the base row, the KL
        const double nll = lse - lg[size_t(target)];
        r.sum_nll += nll, r.sum_nll2 += nll * nll, ++r.n_scored;
        if (writer) quantize_log_probs(lg, lse, row), writer->row(row);
        if (base) {
          base->row(row);
          double nll_base = 0;
          r.kl.push_back(float(kl_divergence(row, lg, lse, target, &nll_base)));
          r.sum_nll_base += nll_base;
          const size_t top = size_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
          r.same_top += top == row.argmax();
        }
      }
    }
    r.n_chunks = c + 1;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (on_chunk && !on_chunk(r)) break;
  }
  if (writer) writer->commit(r.n_chunks);
  return r;
}

}  // namespace krafla
