// Model loading: validate the tensor table against the config, then pack every matrix for
// this build's kernels, in parallel.
#include <fmt/format.h>

#include <deque>
#include <set>
#include <thread>

#include "base/threadpool.h"
#include "io/gguf_dequant.h"
#include "io/gguf_file.h"
#include "krafla/error.h"
#include "model/gguf_import.h"
#include "model/model_impl.h"

namespace krafla {
namespace {

using kernels::WType;

WType matrix_type(const TensorView& t, const std::string& path) {
  switch (t.dtype) {
    case DType::F32:
      return WType::F32;
    case DType::F16:
      return WType::F16;
    case DType::Q8_0:
      return WType::Q8_0;
    case DType::Q4_0:
      return WType::Q4_0;
    case DType::Q4_M:
      return WType::Q4_M;
    case DType::Q6_H:
      return WType::Q6_H;
    case DType::Q5_M:
      return WType::Q5_M;
    case DType::IQ4_NL:
      return WType::IQ4_NL;
    case DType::Q3_H:
      return WType::Q3_H;
    default:
      throw Error(fmt::format("{}: tensor '{}' has dtype {}, which a weight matrix cannot have",
                              path, t.name, dtype_name(t.dtype)));
  }
}

// A matrix to pack and the file's view of its rows: `data` (ggml-layout rows in the mapping or
// in a copy the import made), or while a GGUF K-quant's rows are still in the file's type,
// `source` (rows of source_row bytes of ggml type source_type), rewritten as they are packed.
struct ToPack {
  Matrix* m;
  const TensorView* t;
  const TensorView* whole = nullptr;  // an expert's matrix: the 3-D tensor, on the last one
};

// Hands out the file's tensors by name and shape, remembering which were taken: a tensor
// left over is refused, since it means a feature this build would silently leave out. The
// matrices taken are listed for packing under the name they were taken by.
class TensorTaker {
 public:
  explicit TensorTaker(const ModelFile& f) : f_(f) {}

  const float* vec_f32(const std::string& name, int64_t n) { return f32(name, {n}); }
  const float* mat_f32(const std::string& name, int64_t rows, int64_t cols) {
    return f32(name, {rows, cols});
  }

  // Takes matrix `name` into `m`, and lists it for packing unless `pack` is false (an
  // embedding that is only looked up row by row).
  const TensorView& matrix(Matrix& m, const std::string& name, int64_t rows, int64_t cols,
                           bool pack = true) {
    const TensorView& t = take(name, {rows, cols});
    m.type = matrix_type(t, f_.path());
    m.rows = rows;
    m.cols = cols;
    m.name = name;
    if (pack) to_pack_.push_back({&m, &t});
    return t;
  }

  // Takes the 3-D tensor `name` [E, rows, cols] as E matrices (docs/format.md: each stored
  // as a 2-D one would be, one after another), each listed for packing as "<name>.<e>"; with
  // `parts` > 1, part `part` of each expert's rows of [E, parts * rows, cols] (llama.cpp's
  // fused ffn_gate_up_exps: an expert's gate rows, then its up rows), listed as "<as>.<e>".
  void experts(std::vector<Matrix>& ms, const std::string& name, int64_t E, int64_t rows,
               int64_t cols, int parts = 1, int part = 0, const std::string& as = "") {
    const TensorView& t = take(name, {E, parts * rows, cols});
    const WType type = matrix_type(t, f_.path());
    const uint64_t bytes = t.size / uint64_t(E), part_bytes = bytes / uint64_t(parts);
    const uint64_t src_bytes = uint64_t(rows) * t.source_row;
    ms.resize(size_t(E));
    for (int64_t e = 0; e < E; ++e) {
      Matrix& m = ms[size_t(e)];
      m.type = type;
      m.rows = rows;
      m.cols = cols;
      m.name = fmt::format("{}.{}", as.empty() ? name : as, e);
      TensorView& v = slices_.emplace_back(t);
      v.name = m.name;
      v.shape = {rows, cols};
      v.size = part_bytes;
      const uint64_t at = e * bytes + part * part_bytes;
      v.offset += at;
      if (v.data) v.data += at;
      if (v.source) v.source += (e * parts + part) * src_bytes;
      to_pack_.push_back({&m, &v, e + 1 == E && part + 1 == parts ? &t : nullptr});
    }
  }
  bool has(const std::string& name) const { return f_.find(name) != nullptr; }

  void check_all_taken(const std::string& arch) const {
    for (const auto& t : f_.tensors())
      if (t.dtype != DType::Bytes && !used_.count(t.name))
        throw Error(
            fmt::format("{}: tensor '{}' is not part of a {} model as this build runs it "
                        "(written by a newer converter?)",
                        f_.path(), t.name, arch));
  }
  const std::vector<ToPack>& to_pack() const { return to_pack_; }

 private:
  const float* f32(const std::string& name, std::vector<int64_t> shape) {
    const TensorView& t = take(name, std::move(shape));
    if (t.dtype != DType::F32)
      throw Error(
          fmt::format("{}: tensor '{}' must be f32, is {}", f_.path(), name, dtype_name(t.dtype)));
    return reinterpret_cast<const float*>(t.data);
  }
  const TensorView& take(const std::string& name, std::vector<int64_t> shape) {
    used_.insert(name);
    return f_.get(name, std::move(shape));
  }
  const ModelFile& f_;
  std::set<std::string> used_;
  std::vector<ToPack> to_pack_;
  std::deque<TensorView> slices_;  // the experts' matrices of the 3-D tensors
};

// Only the embedding is read unpacked (row lookups), and from the file's own bytes when the
// GGUF import rewrote it: a copy the import made (reordered rows of a GGUF) is freed as soon as
// it is packed, which keeps the peak near one copy of the weights (pack_all drops the file's
// pages as it goes).
void release_copy(Model::Impl& m, const ToPack& p) {
  if (p.m != &m.tok_embd || p.t->source) m.file->release(p.t->data);
  if (p.whole) m.file->release(p.whole->data);
}

// One matrix at a time, in blocks of rows of about 16 MiB, each block's rows split across the
// threads; a block's file pages go as soon as it is packed, so that even a large embedding is
// never resident twice (its row lookups map back only the rows they read). A GGUF matrix the
// import left to rewrite (a K-quant: `source` without `stored`) is rewritten a block at a time
// into a buffer the size of one block. A mapped pack cache never touches the file's pages of
// the matrices, so nothing to drop there.
void pack_all(Model::Impl& m, const std::vector<ToPack>& mats, ThreadPool& pool) {
  const int64_t tile = kernels::row_tile();
  AlignedBuffer rows;  // one block rewritten (one buffer for all: no holes left in the heap)
  for (const ToPack& tp : mats) {
    Matrix* x = tp.m;  // (clang 14 cannot capture a structured binding)
    x->packed.resize(kernels::packed_size(x->type, x->rows, x->cols), Pages::Huge);
    const auto rb = int64_t(kernels::row_bytes(x->type, x->cols));
    const int64_t block = std::max(tile, (int64_t(16) << 20) / rb / tile * tile);
    const TensorView& t = *tp.t;
    const bool rewrite = !t.data;
    const uint64_t in_row = rewrite ? t.source_row : uint64_t(rb);
    const uint8_t* in = rewrite ? t.source : t.data;
    if (rewrite && rows.size() < size_t(std::min(block, x->rows) * rb))
      rows.resize(size_t(std::min(block, x->rows) * rb));
    for (int64_t b0 = 0; b0 < x->rows; b0 += block) {
      const int64_t n = std::min(block, x->rows - b0);
      const uint8_t* src = rewrite ? rows.data() : t.data + b0 * rb;
      // b0 is a multiple of the row tile: the block packs as a matrix of its own
      uint8_t* dst = x->packed.data() + kernels::packed_size(x->type, b0, x->cols);
      pool.run([&](int ti) {
        auto [r0, r1] = split_range(n, ti, pool.size(), tile);
        if (r0 >= r1) return;
        if (rewrite)
          gguf_rewrite_rows(t.source_type, in + uint64_t(b0 + r0) * in_row, in_row, x->cols,
                            r1 - r0, rows.data() + r0 * rb);
        kernels::pack(x->type, src, n, x->cols, r0, r1, dst);
      });
      m.file->drop_pages(in + uint64_t(b0) * in_row, uint64_t(n) * in_row);
    }
    release_copy(m, tp);
  }
}

// Packs `mats`, or maps them from the pack cache in `dir` (writing it when missing or stale).
void pack_or_map(Model::Impl& m, const std::vector<ToPack>& mats, ThreadPool& pool,
                 const std::string& dir) {
  if (dir.empty()) {
    pack_all(m, mats, pool);
    return;
  }
  std::vector<PackEntry> entries;
  for (const ToPack& p : mats)
    entries.push_back({p.m->name, int(p.m->type), p.m->rows, p.m->cols,
                       uint64_t(kernels::packed_size(p.m->type, p.m->rows, p.m->cols))});
  const std::string path = PackCache::path_for(dir, m.file->path());
  std::string why;
  m.pack_cache = PackCache::open(path, *m.file, entries, &why);
  if (m.pack_cache) {
    for (size_t i = 0; i < mats.size(); ++i) {
      mats[i].m->cached = m.pack_cache->data(i);
      release_copy(m, mats[i]);
    }
    m.load_note = fmt::format("pack cache: mapped {} ({:.1f} MiB)", path,
                              m.pack_cache->file_size() / 1048576.0);
    return;
  }
  pack_all(m, mats, pool);
  std::vector<const void*> data;
  for (const ToPack& p : mats) data.push_back(p.m->packed.data());
  try {
    PackCache::write(path, *m.file, entries, data);
    m.load_note = fmt::format("pack cache: wrote {} ({})", path, why);
  } catch (const Error& e) {
    m.load_note = fmt::format("pack cache: not written: {}", e.what());
  }
}

// A Qwen3.5 Gated DeltaNet layer's tensors (docs/format.md).
void load_delta_layer(TensorTaker& take, const ModelConfig& c, const std::string& p,
                      LayerWeights& L) {
  const int64_t conv_dim = c.lin_conv_dim(), vd = int64_t{c.lin_v_heads} * c.lin_v_dim;
  take.matrix(L.ssm.qkv, p + "ssm_qkv", conv_dim, c.dim);
  take.matrix(L.ssm.z, p + "ssm_z", vd, c.dim);
  take.matrix(L.ssm.beta, p + "ssm_beta", c.lin_v_heads, c.dim);
  take.matrix(L.ssm.alpha, p + "ssm_alpha", c.lin_v_heads, c.dim);
  take.matrix(L.ssm.out, p + "ssm_out", c.dim, vd);
  L.ssm.dt_bias = take.vec_f32(p + "ssm_dt_bias", c.lin_v_heads);
  L.ssm.a = take.vec_f32(p + "ssm_a", c.lin_v_heads);
  L.ssm.norm = take.vec_f32(p + "ssm_norm", c.lin_v_dim);
  // Stored (conv_dim, K) as the checkpoint has it; the conv runs tap by tap over all channels.
  const float* w = take.mat_f32(p + "ssm_conv", conv_dim, c.lin_conv);
  L.ssm.conv_t.resize(size_t(conv_dim) * c.lin_conv);
  for (int64_t ch = 0; ch < conv_dim; ++ch)
    for (int j = 0; j < c.lin_conv; ++j)
      L.ssm.conv_t[size_t(j) * conv_dim + ch] = w[ch * c.lin_conv + j];
}

// A Mixture-of-Experts layer's tensors (docs/format.md).
void load_moe_layer(TensorTaker& take, const ModelConfig& c, const std::string& p,
                    moe::Weights& w) {
  const int64_t E = c.n_experts, I = c.expert_ffn_dim, Is = c.shared_expert_ffn_dim;
  take.matrix(w.router, p + "ffn_gate_inp", E, c.dim);
  if (const std::string fused = p + "ffn_gate_up_exps"; take.has(fused)) {  // GGUF only
    take.experts(w.gate, fused, E, I, c.dim, 2, 0, p + "ffn_gate_exps");
    take.experts(w.up, fused, E, I, c.dim, 2, 1, p + "ffn_up_exps");
  } else {
    take.experts(w.gate, p + "ffn_gate_exps", E, I, c.dim);
    take.experts(w.up, p + "ffn_up_exps", E, I, c.dim);
  }
  take.experts(w.down, p + "ffn_down_exps", E, c.dim, I);
  if (Is > 0) {
    take.matrix(w.shared_router, p + "ffn_gate_inp_shexp", 1, c.dim);
    take.matrix(w.shared_gate, p + "ffn_gate_shexp", Is, c.dim);
    take.matrix(w.shared_up, p + "ffn_up_shexp", Is, c.dim);
    take.matrix(w.shared_down, p + "ffn_down_shexp", c.dim, Is);
  }
}

// One block's tensors (docs/format.md), in the order the pack cache lists them.
void load_layer(TensorTaker& take, const ModelConfig& c, int i, LayerWeights& L) {
  const std::string p = fmt::format("blk.{}.", i);
  const int64_t q_rows = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv_rows = int64_t{c.n_kv_heads} * c.head_dim;
  L.attn_norm = take.vec_f32(p + "attn_norm", c.dim);
  L.ffn_norm = take.vec_f32(p + "ffn_norm", c.dim);
  if (c.layers[i].moe) {
    load_moe_layer(take, c, p, L.moe);
  } else {
    take.matrix(L.gate, p + "ffn_gate", c.ffn_dim, c.dim);
    take.matrix(L.up, p + "ffn_up", c.ffn_dim, c.dim);
    take.matrix(L.down, p + "ffn_down", c.dim, c.ffn_dim);
  }
  if (c.layers[i].kind == LayerConfig::Kind::Linear) {
    load_delta_layer(take, c, p, L);
    return;
  }
  take.matrix(L.attn.wq, p + "attn_q", q_rows, c.dim);
  take.matrix(L.attn.wk, p + "attn_k", kv_rows, c.dim);
  take.matrix(L.attn.wv, p + "attn_v", kv_rows, c.dim);
  take.matrix(L.attn.wo, p + "attn_output", c.dim, q_rows);
  if (c.attn_gate) take.matrix(L.attn.wgate, p + "attn_gate", q_rows, c.dim);
  if (c.qkv_bias) {
    L.attn.bq = take.vec_f32(p + "attn_q_bias", q_rows);
    L.attn.bk = take.vec_f32(p + "attn_k_bias", kv_rows);
    L.attn.bv = take.vec_f32(p + "attn_v_bias", kv_rows);
  }
  if (c.qk_norm) {
    L.attn.q_norm = take.vec_f32(p + "attn_q_norm", c.head_dim);
    L.attn.k_norm = take.vec_f32(p + "attn_k_norm", c.head_dim);
  }
  if (c.post_norms) {
    L.attn_post_norm = take.vec_f32(p + "attn_post_norm", c.dim);
    L.ffn_post_norm = take.vec_f32(p + "ffn_post_norm", c.dim);
  }
}

}  // namespace

void EmbeddingRows::get(int32_t id, float* out, int64_t dim) const {
  const uint8_t* row = base + uint64_t(id) * row_bytes;
  if (gguf_type)
    gguf_dequantize_row(gguf_type, row, out, dim);
  else
    kernels::dequantize_row(type, row, out, dim);
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const Model::Impl& model_impl(const Model& m) { return *m.impl_; }
const std::string& Model::path() const { return impl_->file->path(); }
const ModelConfig& Model::config() const { return impl_->cfg; }
const Tokenizer& Model::tokenizer() const { return *impl_->tok; }
uint64_t Model::packed_bytes() const { return impl_->packed_bytes; }
uint64_t Model::active_packed_bytes() const {
  return impl_->packed_bytes - impl_->idle_expert_bytes;
}
const std::string& Model::load_note() const { return impl_->load_note; }

std::string Model::describe() const {
  const auto& c = impl_->cfg;
  const auto& l0 = impl_->layers.at(0);
  const Matrix& attn = c.layers[0].kind == LayerConfig::Kind::Linear ? l0.ssm.qkv : l0.attn.wq;
  const Matrix& ffn = c.layers[0].moe ? l0.moe.gate.at(0) : l0.gate;
  const std::string mlp =
      c.has_moe()
          ? fmt::format("{} experts ({} active, ffn {}{}){}", c.n_experts, c.n_experts_used,
                        c.expert_ffn_dim,
                        c.shared_expert_ffn_dim
                            ? fmt::format(", shared ffn {}", c.shared_expert_ffn_dim)
                            : "",
                        c.n_moe_layers() < c.n_layers ? fmt::format(", ffn {}", c.ffn_dim) : "")
          : fmt::format("ffn {}", c.ffn_dim);
  return fmt::format(
      "{}: {} layers{}, dim {}, {} heads ({} kv, head_dim {}), {}, vocab {}, "
      "weights {} (ffn) / {} (attn), {:.1f} MiB packed",
      c.arch, c.n_layers,
      c.has_linear() ? fmt::format(" ({} DeltaNet)", c.n_layers - c.n_attn_layers()) : "", c.dim,
      c.n_heads, c.n_kv_heads, c.head_dim, mlp, c.n_vocab, kernels::kWTypeNames[int(ffn.type)],
      kernels::kWTypeNames[int(attn.type)], impl_->packed_bytes / 1048576.0);
}

static Tokenizer tokenizer_from(const ModelFile& f) {
  const auto& tk = f.meta().value("tokenizer", nlohmann::json::object());
  const std::string json_name = tk.value("json", "tokenizer.json");
  const std::string cfg_name = tk.value("config", "tokenizer_config.json");
  const std::string_view cfg = f.find(cfg_name) ? f.bytes(cfg_name) : std::string_view{};
  try {
    return Tokenizer::from_json(f.bytes(json_name), cfg);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: tokenizer: {}", f.path(), e.what()));
  }
}

Tokenizer load_tokenizer(const std::string& path) {
  ModelFile f(path, import_gguf);
  return tokenizer_from(f);
}

ModelFileInfo inspect_model_file(const std::string& path) {
  ModelFile f(path, import_gguf);
  ModelFileInfo info;
  info.path = path;
  info.format = f.is_gguf() ? "gguf" : "krafla-mlb";
  info.kind = f.kind();
  info.version = f.version();
  info.file_size = f.file_size();
  info.data_offset = f.data_offset();
  if (f.kind() == "model") info.config = parse_config(f.meta(), path);
  info.source_json = f.meta().value("source", nlohmann::json::object()).dump();
  for (const auto& t : f.tensors()) {
    const GgmlTypeInfo* from = t.source_type ? ggml_type_info(t.source_type) : nullptr;
    info.tensors.push_back(
        {t.name, dtype_name(t.dtype), t.shape, t.offset, t.size, from ? from->name : ""});
  }
  return info;
}

std::unique_ptr<Model> Model::load(const std::string& path, int n_threads) {
  return load(path, LoadOptions{n_threads, ""});
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& opts) {
  // The CPU guard: the kernels would die of SIGILL on a CPU without the build's instructions.
  if (const char* missing = kernels::missing_cpu_feature())
    throw Error(
        fmt::format("this CPU lacks {}, which this build's kernels ({}) need: use a build "
                    "for an older ISA level",
                    missing, kernels::isa_name()));
  auto m = std::make_unique<Impl>();
  m->file = std::make_unique<ModelFile>(path, import_gguf);
  const ModelFile& f = *m->file;
  if (f.kind() != "model")
    throw Error(fmt::format("{}: this is a {} file, not a model", path, f.kind()));
  m->cfg = parse_config(f.meta(), path);
  const ModelConfig& c = m->cfg;
  m->tok = std::make_unique<Tokenizer>(tokenizer_from(f));
  // The tokenizer may know more tokens than the embedding has rows (Gemma 3's
  // <image_soft_token> sits past vocab_size) or fewer (Qwen pads the embedding): ids the model
  // has no row for are refused when they reach Session::eval, and never sampled.

  TensorTaker take(f);
  m->layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) load_layer(take, c, i, m->layers[i]);
  // The embedding is packed only when the logits use it too; the pack cache lists it last.
  const TensorView& embd = take.matrix(m->tok_embd, "tok_embd", c.n_vocab, c.dim, c.tie_embeddings);
  m->embd_rows =
      embd.source ? EmbeddingRows{embd.source, embd.source_row, m->tok_embd.type, embd.source_type}
                  : EmbeddingRows{embd.data, kernels::row_bytes(m->tok_embd.type, c.dim),
                                  m->tok_embd.type, 0};
  m->output_norm = take.vec_f32("output_norm", c.dim);
  if (c.tie_embeddings) {
    if (f.find("output"))
      throw Error(fmt::format("{}: tie_embeddings is set but an 'output' tensor exists", path));
  } else {
    take.matrix(m->output, "output", c.n_vocab, c.dim);
  }
  take.check_all_taken(c.arch);
  const std::vector<ToPack>& to_pack = take.to_pack();
  ThreadPool pool(opts.n_threads > 0 ? opts.n_threads : int(std::thread::hardware_concurrency()));
  pack_or_map(*m, to_pack, pool, opts.pack_cache_dir);
  for (const ToPack& p : to_pack)
    m->packed_bytes += kernels::packed_size(p.m->type, p.m->rows, p.m->cols);
  for (int i = 0; i < c.n_layers; ++i)
    if (c.layers[i].moe)
      for (const auto* ms : {&m->layers[i].moe.gate, &m->layers[i].moe.up, &m->layers[i].moe.down})
        m->idle_expert_bytes +=
            uint64_t(c.n_experts - c.n_experts_used) *
            kernels::packed_size(ms->front().type, ms->front().rows, ms->front().cols);
  return std::unique_ptr<Model>(new Model(std::move(m)));
}

}  // namespace krafla
