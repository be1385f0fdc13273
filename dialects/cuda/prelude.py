"""The CUDA prelude every emitted kernel includes (`#include "irforge_prelude.cuh"`).

It is generated from `irforge.scalar_ops`: for every op whose CUDA spelling is a function `irf_<name>`, one overload
per dtype the op accepts (double, float, __half, __nv_bfloat16, the integer types, bool), with numpy's semantics
(NaN-propagating max/min, Python's floor division and modulo, round half to even). Half types compute in float and
round once, as the simulator does. The rest is what the emitter's statements call: vector loads and stores,
shared-memory swizzles, cp.async, mbarriers, TMA, ldmatrix and the mma.sync atom, wgmma's descriptors and groups,
atomics, conversions.

The runtime hands this text to NVRTC as a named header, so emitted sources stay short; `prelude_source()` is also
what to save next to a dumped kernel to compile it with nvcc.
"""

from __future__ import annotations

import functools

from irforge.scalar_ops import SCALAR_OPS

PRELUDE_NAME = "irforge_prelude.cuh"

# C types of the scalar types (index is chosen per kernel: int, or long long with index_bits = 64).
C_TYPES = {
    "f64": "double",
    "f32": "float",
    "f16": "__half",
    "bf16": "__nv_bfloat16",
    "i64": "long long",
    "i32": "int",
    "i16": "short",
    "i8": "signed char",
    "u8": "unsigned char",
    "bool": "bool",
}
HALF_TYPES = {"__half": ("__half2float", "__float2half"), "__nv_bfloat16": ("__bfloat162float", "__float2bfloat16")}
INT_TYPES = ("long long", "int", "short", "signed char", "unsigned char")

# Float implementations: {op: (float body, double body)}; `a`, `b` are the operands.
_FLOAT = {
    "floordiv": ("return floorf(a / b);", "return floor(a / b);"),
    "remainder": (
        "float r = fmodf(a, b); return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;",
        "double r = fmod(a, b); return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;",
    ),
    "fmod": ("return fmodf(a, b);", "return fmod(a, b);"),
    "maximum": ("return irf_max_nan(a, b);", "return (a != a || b != b) ? a + b : fmax(a, b);"),
    "minimum": ("return irf_min_nan(a, b);", "return (a != a || b != b) ? a + b : fmin(a, b);"),
    "neg": ("return -a;", "return -a;"),
    "abs": ("return fabsf(a);", "return fabs(a);"),
    "sign": ("return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : a);", "return a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : a);"),
    "pow": ("return powf(a, b);", "return pow(a, b);"),
    # exp(a) = 2^(a log2 e): a multiply and the SFU's ex2 (relative error under 1e-5 for |a| < 80), against expf's
    # ten-instruction range reduction; softmax and attention chains are that much shorter (Triton lowers exp so).
    "exp": ("return exp2f(a * 1.4426950408889634f);", "return exp(a);"),
    "exp_flush": ("return irf_ex2_ftz(a * 1.4426950408889634f);", "double r = exp(a); return r < 0x1p-126 ? 0.0 : r;"),
    # exp(a - b) as ex2(a log2 e - b log2 e): one FFMA, the per-row b log2 e shared by the compiler (flash
    # attention computes its weights so)
    "exp_sub_flush": (
        "return irf_ex2_ftz(fmaf(a, 1.4426950408889634f, -b * 1.4426950408889634f));",
        "double r = exp(a - b); return r < 0x1p-126 ? 0.0 : r;",
    ),
    "exp2": ("return exp2f(a);", "return exp2(a);"),
    "expm1": ("return expm1f(a);", "return expm1(a);"),
    "log": ("return logf(a);", "return log(a);"),
    "log2": ("return log2f(a);", "return log2(a);"),
    "log1p": ("return log1pf(a);", "return log1p(a);"),
    "sqrt": ("return sqrtf(a);", "return sqrt(a);"),
    "rsqrt": ("return rsqrtf(a);", "return rsqrt(a);"),
    "reciprocal": ("return 1.0f / a;", "return 1.0 / a;"),
    "sin": ("return sinf(a);", "return sin(a);"),
    "cos": ("return cosf(a);", "return cos(a);"),
    "tan": ("return tanf(a);", "return tan(a);"),
    "tanh": ("return tanhf(a);", "return tanh(a);"),
    "sigmoid": ("return 1.0f / (1.0f + exp2f(a * -1.4426950408889634f));", "return 1.0 / (1.0 + exp(-a));"),
    "erf": ("return erff(a);", "return erf(a);"),
    "floor": ("return floorf(a);", "return floor(a);"),
    "ceil": ("return ceilf(a);", "return ceil(a);"),
    "round": ("return rintf(a);", "return rint(a);"),
    "trunc": ("return truncf(a);", "return trunc(a);"),
}

# Integer implementations (T is the integer type); bool takes the ones marked.
_INT = {
    "floordiv": "T q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;",
    "remainder": "T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;",
    "fmod": "return a % b;",  # C's % truncates toward zero, as fmod does
    "maximum": "return a > b ? a : b;",
    "minimum": "return a < b ? a : b;",
    "neg": "return -a;",
    "abs": "return a < 0 ? -a : a;",
    "sign": "return (a > 0) - (a < 0);",
    "not": "return ~a;",
}
# Unsigned integers never go below zero: the signed corrections would only draw compiler warnings.
_UNSIGNED = {"floordiv": "return a / b;", "remainder": "return a % b;", "abs": "return a;", "sign": "return a > 0;"}
_BOOL = {"maximum": "return a || b;", "minimum": "return a && b;", "not": "return !a;"}

_HEADER = r"""// irforge prelude: scalar ops (irf_<name>) for every dtype, and the primitives emitted kernels call.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define IRF_DEV __device__ __forceinline__

// NaN-propagating max/min of floats: one FMNMX.NAN from sm_80 on, a compare and a select before.
IRF_DEV float irf_max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fmaxf(a, b);
#endif
}
IRF_DEV float irf_min_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fminf(a, b);
#endif
}
// 2^a, results below 2^-126 flushed to 0: the SFU's ex2 alone (exp2f adds a range fix-up of three instructions).
IRF_DEV float irf_ex2_ftz(float a) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

// ---- conversions ----
IRF_DEV float irf_f32(float a) { return a; }
IRF_DEV float irf_f32(double a) { return (float)a; }
IRF_DEV float irf_f32(__half a) { return __half2float(a); }
IRF_DEV float irf_f32(__nv_bfloat16 a) { return __bfloat162float(a); }
"""

_PRIMITIVES = r"""
template <typename T> IRF_DEV T irf_select(bool c, T a, T b) { return c ? a : b; }

// cast: to bool is x != 0; half types convert through float (doubles directly); floats to integers truncate.
template <typename To> struct irf_cast_to {
  template <typename From> static IRF_DEV To from(From x) { return (To)x; }
  static IRF_DEV To from(__half x) { return (To)__half2float(x); }
  static IRF_DEV To from(__nv_bfloat16 x) { return (To)__bfloat162float(x); }
};
template <> struct irf_cast_to<bool> {
  template <typename From> static IRF_DEV bool from(From x) { return x != (From)0; }
  static IRF_DEV bool from(__half x) { return __half2float(x) != 0.0f; }
  static IRF_DEV bool from(__nv_bfloat16 x) { return __bfloat162float(x) != 0.0f; }
};
template <> struct irf_cast_to<__half> {
  template <typename From> static IRF_DEV __half from(From x) { return __float2half((float)x); }
  static IRF_DEV __half from(double x) { return __double2half(x); }
  static IRF_DEV __half from(__half x) { return x; }
  static IRF_DEV __half from(__nv_bfloat16 x) { return __float2half(__bfloat162float(x)); }
};
template <> struct irf_cast_to<__nv_bfloat16> {
  template <typename From> static IRF_DEV __nv_bfloat16 from(From x) { return __float2bfloat16((float)x); }
  static IRF_DEV __nv_bfloat16 from(double x) { return __double2bfloat16(x); }
  static IRF_DEV __nv_bfloat16 from(__half x) { return __float2bfloat16(__half2float(x)); }
  static IRF_DEV __nv_bfloat16 from(__nv_bfloat16 x) { return x; }
};
// Floats into narrow integers go through 64 bits, then wrap: defined behaviour, and what the numpy reference does.
#define IRF_NARROW_INT_CAST(T) \
  template <> struct irf_cast_to<T> { \
    template <typename From> static IRF_DEV T from(From x) { return (T)(long long)x; } \
    static IRF_DEV T from(__half x) { return (T)(long long)__half2float(x); } \
    static IRF_DEV T from(__nv_bfloat16 x) { return (T)(long long)__bfloat162float(x); } \
  };
IRF_NARROW_INT_CAST(int)
IRF_NARROW_INT_CAST(short)
IRF_NARROW_INT_CAST(signed char)
IRF_NARROW_INT_CAST(unsigned char)
template <typename To, typename From> IRF_DEV To irf_cast(From x) { return irf_cast_to<To>::from(x); }

// ---- memory: N contiguous elements, moved 16 bytes (or the whole access, if smaller) at a time ----
template <int BYTES> struct irf_bits;
template <> struct irf_bits<1> { typedef unsigned char type; };
template <> struct irf_bits<2> { typedef unsigned short type; };
template <> struct irf_bits<4> { typedef unsigned int type; };
template <> struct irf_bits<8> { typedef uint2 type; };
template <> struct irf_bits<16> { typedef uint4 type; };

template <int N, typename T> IRF_DEV void irf_load_n(T* dst, const T* src) {
  constexpr int BYTES = N * (int)sizeof(T);
  constexpr int CHUNK = BYTES < 16 ? BYTES : 16;
  static_assert(BYTES % CHUNK == 0 && (CHUNK & (CHUNK - 1)) == 0, "vector accesses move 1, 2, 4, 8 or 16k bytes");
  typedef typename irf_bits<CHUNK>::type chunk_t;
#pragma unroll
  for (int k = 0; k < BYTES / CHUNK; ++k) {
    chunk_t v = reinterpret_cast<const chunk_t*>(src)[k];
    memcpy(reinterpret_cast<char*>(dst) + k * CHUNK, &v, CHUNK);
  }
}

template <int N, typename T> IRF_DEV void irf_store_n(T* dst, const T* src) {
  constexpr int BYTES = N * (int)sizeof(T);
  constexpr int CHUNK = BYTES < 16 ? BYTES : 16;
  static_assert(BYTES % CHUNK == 0 && (CHUNK & (CHUNK - 1)) == 0, "vector accesses move 1, 2, 4, 8 or 16k bytes");
  typedef typename irf_bits<CHUNK>::type chunk_t;
#pragma unroll
  for (int k = 0; k < BYTES / CHUNK; ++k) {
    chunk_t v;
    memcpy(&v, reinterpret_cast<const char*>(src) + k * CHUNK, CHUNK);
    reinterpret_cast<chunk_t*>(dst)[k] = v;
  }
}

// A whole register tile of contiguous elements.
template <typename T, int N> IRF_DEV void irf_load(T (&dst)[N], const T* src) { irf_load_n<N>(dst, src); }
template <typename T, int N> IRF_DEV void irf_store(T* dst, const T (&src)[N]) { irf_store_n<N>(dst, src); }

// Swizzle<B, M, S> of an element offset: XOR bits [M, M + B) with bits [M + S, M + S + B).
// What the swizzle XORs into a column given its row's part r of the offset (r a multiple of 2^(M + S)):
// irf_swizzle(r + c) == r + (c ^ irf_swizzle_row(r)) for a column c below 2^(M + S).
template <int B, int M, int S, typename I> IRF_DEV I irf_swizzle_row(I r) {
  return ((r >> (M + S)) & ((1 << B) - 1)) << M;
}
template <int B, int M, int S, typename I> IRF_DEV I irf_swizzle(I o) { return o ^ irf_swizzle_row<B, M, S>(o); }

IRF_DEV unsigned irf_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// ---- cp.async: 4, 8 or 16 bytes global -> shared (a 32-bit shared address), completed by commit/wait groups ----
template <int BYTES> IRF_DEV void irf_cp_async(unsigned smem, const void* gmem) {
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem), "l"(gmem), "n"(BYTES) : "memory");
  }
}
IRF_DEV void irf_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> IRF_DEV void irf_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// ---- mbarriers (64-bit objects in shared memory) ----
IRF_DEV void irf_mbarrier_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(irf_smem_addr(bar)), "r"(count) : "memory");
  // Make the initialisation visible to the async proxy (TMA) before any thread uses the barrier.
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
IRF_DEV void irf_mbarrier_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(irf_smem_addr(bar)) : "memory");
}
IRF_DEV void irf_mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(irf_smem_addr(bar)), "r"(bytes)
               : "memory");
}
IRF_DEV void irf_mbarrier_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "IRF_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra IRF_WAIT;\n"
      "}\n" ::"r"(irf_smem_addr(bar)),
      "r"(parity)
      : "memory");
}
IRF_DEV void irf_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- programmatic dependent launch (sm_90) ----
IRF_DEV void irf_griddep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
IRF_DEV void irf_griddep_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
IRF_DEV void irf_prefetch_l2(const void* p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

// ---- thread block clusters (sm_90): the cluster-wide barrier, another block's shared memory ----
IRF_DEV void irf_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The shared::cluster address of `addr` (a shared::cta address) in the block of rank `rank`.
IRF_DEV unsigned irf_mapa_shared(unsigned addr, unsigned rank) {
  unsigned out;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}
// N (1, 2 or 4) 32-bit elements into another block's shared memory, completing 4 N bytes on its mbarrier `bar`.
template <int N>
IRF_DEV void irf_st_async(unsigned addr, const void* v, unsigned bar) {
  const unsigned* u = reinterpret_cast<const unsigned*>(v);
  if constexpr (N == 4) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n"
                 ::"r"(addr), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3]), "r"(bar) : "memory");
  } else if constexpr (N == 2) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n"
                 ::"r"(addr), "r"(u[0]), "r"(u[1]), "r"(bar) : "memory");
  } else {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n"
                 ::"r"(addr), "r"(u[0]), "r"(bar) : "memory");
  }
}
template <typename T>
IRF_DEV T* irf_cluster_map(T* p, unsigned rank) {
  unsigned long long out;
  asm("mapa.u64 %0, %1, %2;\n" : "=l"(out) : "l"(reinterpret_cast<unsigned long long>(p)), "r"(rank));  // pure
  return reinterpret_cast<T*>(out);
}

// ---- TMA: a tensor map is 128 opaque bytes, passed by value as a __grid_constant__ parameter ----
struct __align__(64) irf_tensormap { unsigned long long opaque[16]; };

// Coordinates innermost first, as the copy engine takes them.
template <int RANK> IRF_DEV void irf_tma_load(void* smem, const irf_tensormap* map, unsigned long long* bar,
                                               const int (&c)[RANK]) {
  const unsigned long long m = reinterpret_cast<unsigned long long>(map);
  const unsigned s = irf_smem_addr(smem), b = irf_smem_addr(bar);
  if constexpr (RANK == 1) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];\n"
                 ::"r"(s), "l"(m), "r"(c[0]), "r"(b) : "memory");
  } else if constexpr (RANK == 2) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}],"
                 " [%4];\n" ::"r"(s), "l"(m), "r"(c[0]), "r"(c[1]), "r"(b) : "memory");
  } else if constexpr (RANK == 3) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3,"
                 " %4}], [%5];\n" ::"r"(s), "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(b) : "memory");
  } else if constexpr (RANK == 4) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3,"
                 " %4, %5}], [%6];\n" ::"r"(s), "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(b)
                 : "memory");
  } else {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3,"
                 " %4, %5, %6}], [%7];\n" ::"r"(s), "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]),
                 "r"(b) : "memory");
  }
}

// ---- tensor cores: mma.sync m16n8k16, f32 accumulators; pairs of 16-bit elements share a register ----
IRF_DEV unsigned irf_pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return (unsigned)__bfloat16_as_ushort(lo) | ((unsigned)__bfloat16_as_ushort(hi) << 16);
}
IRF_DEV unsigned irf_pack2(__half lo, __half hi) {
  return (unsigned)__half_as_ushort(lo) | ((unsigned)__half_as_ushort(hi) << 16);
}
// One m16n8k16 atom: D (four accumulators, in place) += A x B; `a` and `b` point at the atom's 8 and 4 elements.
#define IRF_MMA_M16N8K16(T, PTX)                                                                                   \
  IRF_DEV void irf_mma_m16n8k16(float& d0, float& d1, float& d2, float& d3, const T* a, const T* b) {          \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7},"  \
                 " {%8, %9}, {%0, %1, %2, %3};\n"                                                               \
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                                         \
                 : "r"(irf_pack2(a[0], a[1])), "r"(irf_pack2(a[2], a[3])), "r"(irf_pack2(a[4], a[5])),            \
                   "r"(irf_pack2(a[6], a[7])), "r"(irf_pack2(b[0], b[1])), "r"(irf_pack2(b[2], b[3])));           \
  }
IRF_MMA_M16N8K16(__nv_bfloat16, "bf16")
IRF_MMA_M16N8K16(__half, "f16")
// The atom's top half: A's rows 8-15 are zeros (the lane holds a0, a1, a4, a5 of its 8: row g). Their results
// (rows 8-15 of D) accumulate in place in g2, g3, which the caller drops: zeros times B, so they stay zero while B is
// finite, and nothing reads them when it is not.
#define IRF_MMA_M16N8K16_TOP(T, PTX)                                                                             \
  IRF_DEV void irf_mma_m16n8k16_top(float& d0, float& d1, float& g2, float& g3, const T* a, const T* b) {        \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7},"  \
                 " {%8, %9}, {%0, %1, %2, %3};\n"                                                               \
                 : "+f"(d0), "+f"(d1), "+f"(g2), "+f"(g3)                                                         \
                 : "r"(irf_pack2(a[0], a[1])), "r"(0u), "r"(irf_pack2(a[2], a[3])), "r"(0u),                      \
                   "r"(irf_pack2(b[0], b[1])), "r"(irf_pack2(b[2], b[3])));                                       \
  }
IRF_MMA_M16N8K16_TOP(__nv_bfloat16, "bf16")
IRF_MMA_M16N8K16_TOP(__half, "f16")

// ---- wgmma (sm_90a): operands in shared memory, named by 64-bit matrix descriptors ----
// A descriptor: the tile's shared-memory address in 16-byte units (bits 0-13) or'ed with its layout fields (LBO,
// SBO, swizzle mode), which the emitter computes from the buffer's type.
IRF_DEV unsigned long long irf_wgmma_desc(const void* tile, unsigned long long layout) {
  return (unsigned long long)((irf_smem_addr(tile) & 0x3FFFF) >> 4) | layout;
}
IRF_DEV void irf_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
IRF_DEV void irf_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> IRF_DEV void irf_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// ldmatrix: COUNT (1, 2, 4) 8 x 8 matrices of 16-bit elements from the 32-bit shared address s (this lane's row);
// this lane's pair of each lands in dst[2q], dst[2q+1].
template <int COUNT, bool TRANS, typename T> IRF_DEV void irf_ldmatrix(T* dst, unsigned s) {
  unsigned r[COUNT];
  if constexpr (COUNT == 4 && TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  } else if constexpr (COUNT == 4) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  } else if constexpr (COUNT == 2 && TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
  } else if constexpr (COUNT == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
  } else if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
  }
  memcpy(dst, r, sizeof(r));
}

// ---- atomics: add natively; float max/min by compare-and-swap (NaN-propagating like irf_maximum) ----
IRF_DEV void irf_atomic_add(float* p, float v) { atomicAdd(p, v); }
IRF_DEV void irf_atomic_add(double* p, double v) { atomicAdd(p, v); }
IRF_DEV void irf_atomic_add(__half* p, __half v) { atomicAdd(p, v); }
IRF_DEV void irf_atomic_add(__nv_bfloat16* p, __nv_bfloat16 v) { atomicAdd(p, v); }
IRF_DEV void irf_atomic_add(int* p, int v) { atomicAdd(p, v); }
IRF_DEV void irf_atomic_add(long long* p, long long v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
IRF_DEV void irf_atomic_max(int* p, int v) { atomicMax(p, v); }
IRF_DEV void irf_atomic_max(long long* p, long long v) { atomicMax(p, v); }
IRF_DEV void irf_atomic_min(int* p, int v) { atomicMin(p, v); }
IRF_DEV void irf_atomic_min(long long* p, long long v) { atomicMin(p, v); }
IRF_DEV void irf_atomic_max(float* p, float v) {
  int* q = reinterpret_cast<int*>(p);
  int old = *q, assumed;
  do {
    assumed = old;
    old = atomicCAS(q, assumed, __float_as_int(irf_maximum(__int_as_float(assumed), v)));
  } while (old != assumed);
}
IRF_DEV void irf_atomic_min(float* p, float v) {
  int* q = reinterpret_cast<int*>(p);
  int old = *q, assumed;
  do {
    assumed = old;
    old = atomicCAS(q, assumed, __float_as_int(irf_minimum(__int_as_float(assumed), v)));
  } while (old != assumed);
}
IRF_DEV void irf_atomic_max(double* p, double v) {
  unsigned long long* q = reinterpret_cast<unsigned long long*>(p);
  unsigned long long old = *q, assumed;
  do {
    assumed = old;
    old = atomicCAS(q, assumed, __double_as_longlong(irf_maximum(__longlong_as_double(assumed), v)));
  } while (old != assumed);
}
IRF_DEV void irf_atomic_min(double* p, double v) {
  unsigned long long* q = reinterpret_cast<unsigned long long*>(p);
  unsigned long long old = *q, assumed;
  do {
    assumed = old;
    old = atomicCAS(q, assumed, __double_as_longlong(irf_minimum(__longlong_as_double(assumed), v)));
  } while (old != assumed);
}
"""


def _scalar_functions() -> str:
    out = ["\n// ---- scalar ops from irforge.scalar_ops ----"]
    for name, op in SCALAR_OPS.items():
        if op.infix or op.kind in ("select", "cast"):  # templates, with the primitives below
            continue
        args = "a" if op.arity == 1 else "a, b"
        out.append(f"// {name}: {op.summary}")
        if name in _FLOAT:
            for ctype, body in zip(("float", "double"), _FLOAT[name]):
                params = ", ".join(f"{ctype} {x}" for x in args.split(", "))
                out.append(f"IRF_DEV {ctype} irf_{name}({params}) {{ {body} }}")
            for ctype, (to_f, from_f) in HALF_TYPES.items():
                params = ", ".join(f"{ctype} {x}" for x in args.split(", "))
                conv = ", ".join(f"{to_f}({x})" for x in args.split(", "))
                out.append(f"IRF_DEV {ctype} irf_{name}({params}) {{ return {from_f}(irf_{name}({conv})); }}")
        if op.kind in ("arith", "logic") and name in _INT:
            for ctype in INT_TYPES:
                params = ", ".join(f"{ctype} {x}" for x in args.split(", "))
                body = _UNSIGNED.get(name, _INT[name]) if ctype.startswith("unsigned") else _INT[name]
                body = body.replace("T ", f"{ctype} ")
                out.append(f"IRF_DEV {ctype} irf_{name}({params}) {{ {body} }}")
        if name in _BOOL:
            params = ", ".join(f"bool {x}" for x in args.split(", "))
            out.append(f"IRF_DEV bool irf_{name}({params}) {{ {_BOOL[name]} }}")
        if op.cuda_source:
            out.append(op.cuda_source.strip())
    return "\n".join(out) + "\n"


@functools.cache
def prelude_source() -> str:
    """The prelude's text (deterministic: it is part of every kernel's compilation-cache key)."""
    return _HEADER + _scalar_functions() + _PRIMITIVES


def prelude_functions() -> dict[str, set[str]]:
    """For each scalar op with a prelude overload set, the C types it has an overload for (select and cast are
    templates over every type, and are not listed)."""
    import re

    found: dict[str, set[str]] = {}
    for m in re.finditer(r"IRF_DEV ([\w ]+?) irf_(\w+)\(", prelude_source()):
        if m.group(2) in SCALAR_OPS and SCALAR_OPS[m.group(2)].kind not in ("select", "cast"):
            found.setdefault(m.group(2), set()).add(m.group(1))
    return found
