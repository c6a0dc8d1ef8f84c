// Compiled in every build with baseline flags: row sizes, exact f16 conversion, CPU detection.
#include "kernels/common.h"

#include <cstring>

#include "kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) || defined(__arm__)
#include <sys/auxv.h>
#endif

namespace krafla::kernels {

size_t row_bytes(WType t, int64_t cols) {
  switch (t) {
    case WType::F32:
      return size_t(cols) * 4;
    case WType::F16:
      return size_t(cols) * 2;
    case WType::Q8_0:
      return size_t(cols / kQBlock) * sizeof(BlockQ8_0);
    case WType::Q4_0:
      return size_t(cols / kQBlock) * sizeof(BlockQ4_0);
    case WType::Q4_M:
      return size_t(cols / kQBlock) * sizeof(BlockQ4_M);
    case WType::Q6_H:
      return size_t(cols / kQBlock) * sizeof(BlockQ6_H);
    case WType::Q5_M:
      return size_t(cols / kQBlock) * sizeof(BlockQ5_M);
    case WType::IQ4_NL:
      return size_t(cols / kQBlock) * sizeof(BlockIQ4_NL);
    case WType::Q3_H:
      return size_t(cols / kQBlock) * sizeof(BlockQ3_H);
  }
  return 0;
}

bool copy_float_act(WType t, const float* x, int64_t cols, void* dst) {
  if (t != WType::F32 && t != WType::F16) return false;
  std::memcpy(dst, x, size_t(cols) * 4);
  return true;
}

float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    // inf, or NaN with its payload kept and the quiet bit set.
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalise; value = mant * 2^-24.
    int e = 113;  // exponent field of 2^-14
    while (!(mant & 0x400)) {
      mant <<= 1;
      --e;
    }
    bits = sign | (uint32_t(e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t exp = (x >> 23) & 0xff;
  const uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) {
    if (mant == 0) return sign | 0x7c00;
    return uint16_t(sign | 0x7e00 | (mant >> 13));
  }
  const int e = int(exp) - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;  // overflow (before rounding) -> inf
  if (e <= 0) {
    // Result is subnormal (or zero): shift the full significand into the 10-bit field.
    if (e < -10) return sign;  // below half of the smallest subnormal -> 0
    const uint32_t m = mant | 0x800000;
    const int shift = 14 - e;  // 13 + (1 - e)
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1))) ++h;  // may carry into the normal range
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // carry may reach inf: correct
  return uint16_t(sign | h);
}

#if defined(__x86_64__) || defined(__i386__)
namespace {

struct CpuBits {
  uint32_t edx1 = 0, ecx1 = 0, ebx7 = 0, ecx7 = 0, eax7_1 = 0;
  uint64_t xcr0 = 0;
};

CpuBits read_cpu() {
  CpuBits c;
  unsigned a, b, cx, d;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  c.edx1 = d;
  c.ecx1 = cx;
  if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
    c.ebx7 = b;
    c.ecx7 = cx;
    if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.eax7_1 = a;  // a: max subleaf
  }
  if (c.ecx1 & (1u << 27)) {  // OSXSAVE: xgetbv is allowed
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    c.xcr0 = (uint64_t(hi) << 32) | lo;
  }
  return c;
}

}  // namespace

// The x86 levels in order, each needing everything before it, except that avx512vnni does not
// need AVX-VNNI (the VEX form came later, with client CPUs; AVX-512 servers before Sapphire
// Rapids lack it).
const char* cpu_missing_for(const char* isa) {
  const auto is = [isa](const char* n) { return std::strcmp(isa, n) == 0; };
  const bool want512 = is("avx512vnni"), want_vnni = is("avxvnni");
  const bool want256 = want512 || want_vnni || is("avx2");
  const bool want41 = want256 || is("sse41");
  if (!want41 && !is("sse2")) return nullptr;
  const CpuBits c = read_cpu();
  if (!(c.edx1 & (1u << 26))) return "sse2";
  if (!want41) return nullptr;
  if (!(c.ecx1 & (1u << 0))) return "sse3";
  if (!(c.ecx1 & (1u << 9))) return "ssse3";
  if (!(c.ecx1 & (1u << 19))) return "sse4.1";
  if (!(c.ecx1 & (1u << 23))) return "popcnt";
  if (!want256) return nullptr;
  if (!(c.ecx1 & (1u << 28))) return "avx";
  if (!(c.ebx7 & (1u << 5))) return "avx2";
  if (!(c.ecx1 & (1u << 12))) return "fma";
  if (!(c.ecx1 & (1u << 29))) return "f16c";
  if ((c.xcr0 & 0x6) != 0x6) return "os-ymm";  // the OS must save XMM and YMM state
  if (want_vnni) return (c.eax7_1 & (1u << 4)) ? nullptr : "avxvnni";
  if (!want512) return nullptr;
  if (!(c.ebx7 & (1u << 16))) return "avx512f";
  if (!(c.ebx7 & (1u << 30))) return "avx512bw";
  if (!(c.ebx7 & (1u << 31))) return "avx512vl";
  if (!(c.ebx7 & (1u << 17))) return "avx512dq";
  if (!(c.ecx7 & (1u << 11))) return "avx512vnni";
  if ((c.xcr0 & 0xe0) != 0xe0) return "os-zmm";  // opmask, ZMM_Hi256, Hi16_ZMM state
  return nullptr;
}
#elif defined(__aarch64__) || defined(__arm__)
// Arm: the feature bits Linux reports in the auxiliary vector. The names are /proc/cpuinfo's
// (what scripts/detect_isa.sh reads). Each level checks every extension its kernel TU is
// compiled for (cmake/isa_flags.cmake).
const char* cpu_missing_for(const char* isa) {
  const auto is = [isa](const char* n) { return std::strcmp(isa, n) == 0; };
  const unsigned long hw = getauxval(AT_HWCAP);
#if defined(__aarch64__)
  constexpr unsigned long kAsimd = 1ul << 1, kAsimdDp = 1ul << 20, kSve = 1ul << 22;
  constexpr unsigned long kI8mm2 = 1ul << 13;  // in AT_HWCAP2
  const bool want_i8mm = is("i8mm"), want_dp = want_i8mm || is("dotprod"), want_sve = is("sve");
  if (!(want_dp || want_sve || is("neon"))) return nullptr;
  if (!(hw & kAsimd)) return "asimd";
  if (want_dp && !(hw & kAsimdDp)) return "asimddp";
  if (want_i8mm && !(getauxval(AT_HWCAP2) & kI8mm2)) return "i8mm";
  if (want_sve && !(hw & kSve)) return "sve";
#else
  constexpr unsigned long kNeon = 1ul << 12, kVfpv4 = 1ul << 16;
  if (!is("neon32")) return nullptr;
  if (!(hw & kNeon)) return "neon";
  if (!(hw & kVfpv4)) return "vfpv4";
#endif
  return nullptr;
}
#else
const char* cpu_missing_for(const char* isa) {
  return std::strcmp(isa, "scalar") == 0 ? nullptr : isa;
}
#endif

}  // namespace krafla::kernels
