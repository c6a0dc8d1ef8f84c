// Open-addressing hash tables for the two big lookups of BPE: token string -> id (the strings
// live once, in Vocab::tokens; the table holds only ids) and (left, right) symbol pair -> merge.
// std::unordered_map spent most of Gemma 3's load time allocating ~800k nodes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace krafla::tok {

class TokenIndex {
 public:
  // Maps tokens[id] -> id, replacing an earlier id with the same string (as a JS Map would).
  void insert(int32_t id, const std::vector<std::string>& tokens) {
    if ((count_ + 1) * 2 > slots_.size()) grow(tokens);
    size_t i = slot_of(tokens[id], tokens);
    if (slots_[i] < 0) ++count_;
    slots_[i] = id;
  }
  int32_t find(std::string_view s, const std::vector<std::string>& tokens) const {
    if (slots_.empty()) return -1;
    return slots_[slot_of(s, tokens)];
  }
  void reserve(size_t n, const std::vector<std::string>& tokens) {
    while (n * 2 > slots_.size()) grow(tokens);
  }

 private:
  size_t slot_of(std::string_view s, const std::vector<std::string>& tokens) const {
    size_t mask = slots_.size() - 1;
    for (size_t i = std::hash<std::string_view>{}(s)&mask;; i = (i + 1) & mask)
      if (slots_[i] < 0 || tokens[slots_[i]] == s) return i;
  }
  void grow(const std::vector<std::string>& tokens) {
    std::vector<int32_t> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, -1);
    for (int32_t id : old)
      if (id >= 0) slots_[slot_of(tokens[id], tokens)] = id;
  }
  std::vector<int32_t> slots_;
  size_t count_ = 0;
};

template <typename Value>
class PairMap {
 public:
  void reserve(size_t n) {
    size_t cap = 1024;
    while (cap < n * 2) cap *= 2;
    keys_.assign(cap, kEmpty);
    values_.resize(cap);
    count_ = 0;
  }
  // Inserts or overwrites.
  void put(uint64_t key, const Value& v) {
    if ((count_ + 1) * 2 > keys_.size()) rehash(keys_.empty() ? 1024 : keys_.size() * 2);
    size_t i = slot_of(key);
    if (keys_[i] == kEmpty) ++count_;
    keys_[i] = key;
    values_[i] = v;
  }
  const Value* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    size_t i = slot_of(key);
    return keys_[i] == key ? &values_[i] : nullptr;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t mix(uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  size_t slot_of(uint64_t key) const {
    size_t mask = keys_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask)
      if (keys_[i] == kEmpty || keys_[i] == key) return i;
  }
  void rehash(size_t cap) {
    std::vector<uint64_t> ok = std::move(keys_);
    std::vector<Value> ov = std::move(values_);
    keys_.assign(cap, kEmpty);
    values_.resize(cap);
    for (size_t i = 0; i < ok.size(); ++i)
      if (ok[i] != kEmpty) {
        size_t j = slot_of(ok[i]);
        keys_[j] = ok[i];
        values_[j] = ov[i];
      }
  }
  std::vector<uint64_t> keys_;
  std::vector<Value> values_;
  size_t count_ = 0;
};

}  // namespace krafla::tok
