#include "krafla/profile.h"

#include <fmt/format.h>

#include <chrono>
#include <numeric>

namespace krafla {

double profile_clock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Profile::total() const { return std::accumulate(seconds.begin(), seconds.end(), 0.0); }

const char* Profile::name(Op op) {
  static const char* const kNames[] = {
      "embedding",       "rmsnorm",         "matmul q/k/v", "rope + kv store",  "attention",
      "matmul attn out", "matmul delta in", "delta rule",   "matmul delta out", "gate/up + act",
      "matmul down",     "moe routing",     "residual",     "matmul output",    "sampling"};
  static_assert(std::size(kNames) == size_t(Op::Count));
  return kNames[size_t(op)];
}

std::string Profile::table(double wall_seconds) const {
  const double sum = total();
  std::string s =
      fmt::format("{:<18} {:>8} {:>10} {:>7} {:>10}\n", "op", "calls", "ms", "%", "us/call");
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (calls[i] == 0) continue;
    s += fmt::format("{:<18} {:>8} {:>10.2f} {:>6.1f}% {:>10.1f}\n", name(Op(i)), calls[i],
                     seconds[i] * 1e3, sum > 0 ? 100.0 * seconds[i] / sum : 0.0,
                     1e6 * seconds[i] / double(calls[i]));
  }
  s += fmt::format("{:<18} {:>8} {:>10.2f} {:>6.1f}% of the wall time ({:.2f} ms)\n", "total", "",
                   sum * 1e3, wall_seconds > 0 ? 100.0 * sum / wall_seconds : 0.0,
                   wall_seconds * 1e3);
  return s;
}

}  // namespace krafla
