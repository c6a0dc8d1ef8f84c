// Importance matrix: per weight matrix, the sum of squares of each input channel over every
// row the matrix multiplied (ml_run --imatrix FILE; tools/convert.py --imatrix weights the
// Q4_0 fits by it). File format: docs/format.md ("The .imatrix file").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace krafla {

class Imatrix {
 public:
  struct Entry {
    int64_t rows = 0;          // input rows accumulated
    std::vector<double> sum2;  // per input channel: Σ x²
  };

  // Adds n input rows of width cols (row-major) to matrix `name`'s entry. Throws krafla::Error
  // when `name` already has another width.
  void add(const std::string& name, const float* x, int64_t cols, int n);
  void add_tokens(int64_t n) { tokens_ += n; }

  // Reads a file written by save() and adds it to this one (the same matrix names must have
  // the same widths). Throws krafla::Error naming the file and what is wrong: not an imatrix
  // file, another version, truncated, a bad entry.
  void merge_file(const std::string& path);
  // Writes PATH.tmp, then renames it over PATH: the file is replaced only once fully written.
  void save(const std::string& path) const;

  const std::map<std::string, Entry>& entries() const { return entries_; }
  int64_t tokens() const { return tokens_; }

 private:
  std::map<std::string, Entry> entries_;
  int64_t tokens_ = 0;  // tokens evaluated into it (for the record)
};

}  // namespace krafla
