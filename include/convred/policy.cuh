/// @file policy.cuh
/// @brief Tile policies (plain constexpr types) and math-precision tags.
#pragma once

#include <type_traits>

namespace convred {

/// @brief Math-precision tags: how a kernel multiplies (never a silent default; see README "Precision").
/// All accumulate in fp32 (fp64 for double with ieee); epilogue and reduction run in fp32.
namespace math {
/// Exact IEEE fp32 (or fp64 for double) fused multiply-add on the CUDA cores (FFMA / DFMA). Matches a
/// float64 reference to ~1e-6 relative (fp32). Note: PyTorch's default conv2d math on Ampere and later
/// is TF32 (torch.backends.cudnn.allow_tf32 = True), which is less accurate (~1e-4).
struct ieee {};
/// TF32 tensor cores: x and w rounded to TF32 (10-bit mantissa) with round-to-nearest (as cuDNN's TF32
/// convolutions: ties away from zero, cvt.rna, in the mma.sync m16n8k8 kernels; ties to even, cvt.rn, in
/// the sm_90a wgmma kernel), fp32 accumulation. ~1e-4 relative.
struct tf32 {};
/// 3xTF32 on tensor cores: each operand split as big = tf32(v), small = tf32(v - big), and
/// a*b ~= a_big*b_big + a_big*b_small + a_small*b_big (three mma.sync per product; the dropped
/// small*small term is below fp32 rounding). fp32-level accuracy at tensor-core speed: ~2e-7 relative
/// (mma.sync kernels, which promote each stage's sum with an IEEE add) and ~4e-6 (wgmma kernel, seed
/// case), both within the 1e-5 tolerance of docs/tolerances.md.
/// As CUTLASS's 3xTF32 "fast accurate" GEMMs (NVIDIA, CUTLASS examples 27/28).
struct tf32x3 {};
/// bfloat16 tensor cores (mma.sync m16n8k16): operands converted to bf16 (round to nearest even) on
/// chip, fp32 accumulation. ~1e-3 relative.
struct bf16 {};
/// fp16 tensor cores (mma.sync m16n8k16): operands converted to fp16 (round to nearest even) on chip,
/// fp32 accumulation. Values beyond fp16's range (65504) overflow. ~5e-4 relative.
struct fp16 {};
/// fp32-accurate, the planner's default (device::conv2d_reduce_plan only): the fastest kernel whose tests
/// hold the error vs float64 to 1e-6 relative on the device it runs on: 3xTF32 (tf32x3) on tensor-core
/// GPUs (sm_80 and newer), exact FMA (ieee) on older ones and for double data. PyTorch's own default
/// conv2d on these GPUs is TF32 (~1e-4).
struct accurate {};
}  // namespace math

/// @brief SIMT implicit-GEMM tile policy for the CUDA-core (`math::ieee`) kernels.
///
/// A thread block computes a tile of `BlockM` output pixels (GEMM_M) by `BlockN` output channels
/// (GEMM_N), stepping through GEMM_K = (C/groups)*R*S in slices of `BlockK` staged in shared memory
/// (Stages deep with cp.async for 4- and 8-byte types, double-buffered through registers for 16-bit ones). Each thread holds `ThreadM` x `ThreadN` fp32 (or fp64) accumulators in registers.
/// The `BlockN / ThreadN` threads that share a pixel group form one logical warp, so the reduction
/// across channels is a `cub::WarpReduce` of that width. `MinBlocksPerSM` feeds `__launch_bounds__`.
///
/// Requirements (checked by static_assert): ThreadM and ThreadN multiples of 4; BlockN / ThreadN a power of
/// two <= 32; threads a multiple of 32 and of BlockM; BlockK*BlockM and BlockK*BlockN multiples of threads.
template <int BlockM, int BlockN, int BlockK, int ThreadM, int ThreadN, int MinBlocksPerSM = 1, int Stages = 2>
struct simt_policy {
  using math = math::ieee;                                  ///< precision tag
  static constexpr int block_m = BlockM;                    ///< output pixels per block (GEMM_M tile)
  static constexpr int block_n = BlockN;                    ///< output channels per block (GEMM_N tile)
  static constexpr int block_k = BlockK;                    ///< GEMM_K slice per shared-memory stage
  static constexpr int thread_m = ThreadM;                  ///< pixels per thread
  static constexpr int thread_n = ThreadN;                  ///< channels per thread
  static constexpr int min_blocks_per_sm = MinBlocksPerSM;  ///< occupancy hint for __launch_bounds__
  static constexpr int stages = Stages;                     ///< shared-memory stages (cp.async path)
  static constexpr int channel_groups = BlockN / ThreadN;   ///< threads across channels (logical warp)
  static constexpr int pixel_groups = BlockM / ThreadM;     ///< threads across pixels
  static constexpr int threads = channel_groups * pixel_groups;  ///< threads per block
  static constexpr bool tensor_core = false;                      ///< CUDA-core (SIMT) mainloop

  static_assert(ThreadM % 4 == 0 && ThreadN % 4 == 0, "thread tile must be a multiple of 4 each way");
  static_assert(BlockM % ThreadM == 0 && BlockN % ThreadN == 0, "block tile must divide by thread tile");
  static_assert(channel_groups <= 32 && (channel_groups & (channel_groups - 1)) == 0,
                "BlockN / ThreadN must be a power of two <= 32 (one logical warp)");
  static_assert(threads % 32 == 0 && threads % BlockM == 0, "threads must be a multiple of 32 and BlockM");
  static_assert((BlockK * BlockM) % threads == 0 && (BlockK * BlockN) % threads == 0,
                "each thread must stage a whole number of elements");
  static_assert(BlockK % ((BlockK * BlockN) / threads) == 0, "weight staging must tile BlockK");
};

/// @brief Tensor-core (mma.sync, sm_80+) implicit-GEMM tile policy for the tf32, tf32x3, bf16 and fp16
/// math tags.
///
/// A block of WarpsM x WarpsN warps computes BlockM pixels x BlockN channels; each warp a
/// (BlockM/WarpsM) x (BlockN/WarpsN) tile of 16x8 mma tiles; GEMM_K is staged BlockK deep through a
/// Stages-deep cp.async pipeline in shared memory (as fp32, converted to the math's operand type when fragments are
/// loaded). The reduction across channels is a 4-lane cub::WarpReduce (the lanes of an mma row) followed
/// by a combine of the WarpsN warps that share the pixels, through shared memory.
/// Requirements (static_assert): warp tile a multiple of 16 x 8; BlockK a multiple of the mma depth
/// (8 for tf32/tf32x3, 16 for bf16/fp16); BlockM a multiple of 32.
template <class Math, int BlockM, int BlockN, int BlockK, int WarpsM, int WarpsN, int MinBlocksPerSM = 1,
          int Stages = 3>
struct mma_sync_policy {
  using math = Math;                                        ///< precision tag
  static constexpr int block_m = BlockM;                    ///< output pixels per block (GEMM_M tile)
  static constexpr int block_n = BlockN;                    ///< output channels per block (GEMM_N tile)
  static constexpr int block_k = BlockK;                    ///< GEMM_K slice per shared-memory stage
  static constexpr int warps_m = WarpsM;                    ///< warps along pixels
  static constexpr int warps_n = WarpsN;                    ///< warps along channels
  static constexpr int min_blocks_per_sm = MinBlocksPerSM;  ///< occupancy hint for __launch_bounds__
  static constexpr int stages = Stages;                     ///< shared-memory stages (cp.async path)
  static constexpr int threads = 32 * WarpsM * WarpsN;      ///< threads per block
  static constexpr bool tensor_core = true;                 ///< mma.sync mainloop
  /// mma depth (GEMM_K per mma.sync): 8 for tf32 and tf32x3 (m16n8k8), 16 for bf16 and fp16 (m16n8k16).
  static constexpr int mma_k = (std::is_same_v<Math, convred::math::tf32> || std::is_same_v<Math, convred::math::tf32x3>) ? 8 : 16;
  static_assert(std::is_same_v<Math, convred::math::tf32> || std::is_same_v<Math, convred::math::tf32x3> ||
                    std::is_same_v<Math, convred::math::bf16> || std::is_same_v<Math, convred::math::fp16>,
                "mma_sync_policy: math must be tf32, tf32x3, bf16 or fp16");
  static_assert(BlockM % (16 * WarpsM) == 0 && BlockN % (8 * WarpsN) == 0, "warp tile must be a multiple of 16x8");
  static_assert(BlockK % mma_k == 0, "BlockK must be a multiple of the mma depth");
  static_assert(BlockM % 32 == 0 && BlockN % 32 == 0, "BlockM and BlockN must be multiples of 32");
};

/// @brief Default tensor-core policy for a math tag: 256 pixels x 128 channels x 32 deep, 4 x 2 warps
/// (64 x 64 warp tiles), one block per SM, 3 cp.async stages: the fastest of the variants measured on the
/// H200 seed case (bench/NOTES.md).
template <class Math>
struct default_mma_sync_policy {
  using type = mma_sync_policy<Math, 256, 128, 32, 4, 2, 1, 3>;  ///< the default mma_sync_policy for Math
};
/// @brief Default 3xTF32 policy: 128 x 128 x 32 with 2 x 4 warps (64 x 32 warp tiles), leaving
/// registers for the per-stage accumulator that 3xTF32 promotes with IEEE adds (conv_mainloop_mma_sync).
template <>
struct default_mma_sync_policy<math::tf32x3> {
  using type = mma_sync_policy<math::tf32x3, 128, 128, 32, 2, 4, 1, 3>;  ///< the default mma_sync_policy for tf32x3
};

/// @brief Default SIMT policy for element type T (float, __half, __nv_bfloat16: fp32 compute):
/// 256 pixels x 128 channels x 8 deep, 8x8 per thread, 512 threads, one block per SM (128 registers),
/// 3 cp.async stages. Chosen by measurement on the H200 seed case (bench/NOTES.md): 16.8 ms against
/// 18.7 ms for 128x128x8 with two blocks per SM. 64x64x8 with 4x4 per thread for double (fp64 accumulators need twice the
/// registers).
template <class T>
struct default_simt_policy {
  using type = simt_policy<256, 128, 8, 8, 8, 1, 3>;  ///< the default simt_policy for T
};
/// @brief Default SIMT policy for double.
template <>
struct default_simt_policy<double> {
  using type = simt_policy<64, 64, 8, 4, 4, 2>;  ///< the default simt_policy for double
};

/// @brief SIMT policies of the narrow family (family::simt_narrow), by tile width BlockN: 16 channels (K/groups
/// 1 to 16: 128 pixels x 16 channels x 8 deep, 4x4 per thread) and 32 channels (K/groups 17 to 32: 128 x 32 x
/// 8, 4x8 per thread); 128 threads, 3 cp.async stages (no occupancy hint: their few registers let several
/// blocks share an SM anyway). The default policy's 128-channel tile would compute 4x (K = 32) to 128x (K =
/// 1) the layer's FMAs there, the tensor-core policies' 128-channel tiles as much of their operations.
template <class T, int BlockN = 16>
struct narrow_simt_policy {
  static_assert(BlockN == 16 || BlockN == 32, "narrow_simt_policy: 16- or 32-channel tiles");
  /// the narrow family's simt_policy for T and BlockN
  using type = std::conditional_t<BlockN == 16, simt_policy<128, 16, 8, 4, 4, 1, 3>, simt_policy<128, 32, 8, 4, 8, 1, 3>>;
};

/// @brief mma.sync policy of the narrow tensor-core family (family::mma_narrow: at most 32 output channels per
/// group under TF32, bf16 or fp16): 128 pixels x 32 channels x 32 deep, 4 x 1 warps (32 x 32 warp tiles),
/// two blocks per SM, 3 cp.async stages (fp32 data: ~68 KB of shared memory a block, so two fit on sm_80 and
/// sm_90, one on sm_86 and sm_89, where the model's two resident blocks are optimistic). The default policy's
/// 128-channel tile computes 4x (K = 32) to 128x (K = 1) the layer's products there.
template <class Math>
struct narrow_mma_sync_policy {
  using type = mma_sync_policy<Math, 128, 32, 32, 4, 1, 2, 3>;  ///< the narrow tensor-core family's policy
};

/// Registers per producer thread of a wgmma block after `setmaxnreg` (the transform holds E 16-byte
/// loads and their 4 converted plane entries).
inline constexpr int wgmma_producer_registers = 72;
/// Registers per consumer thread of a wgmma block after `setmaxnreg` (the 128 accumulators and the
/// epilogue) with `producers` producer warpgroups: 216 with one, 184 with two.
constexpr int wgmma_consumer_registers(int producers) { return producers == 1 ? 216 : 184; }
/// Whether a wgmma block of two consumer warpgroups and `producers` producer warpgroups fits, after
/// `setmaxnreg`, the registers it is launched with (__launch_bounds__(threads, 1): 65536 / threads per
/// thread rounded down to a multiple of 8, 168 for 384 threads, 128 for 512); otherwise setmaxnreg.inc
/// would wait forever.
constexpr bool wgmma_registers_fit(int producers) {
  const int t = 256 + 128 * producers;
  return 256 * wgmma_consumer_registers(producers) + 128 * producers * wgmma_producer_registers <= t * (65536 / t / 8 * 8);
}

/// @brief Hopper (sm_90a) warpgroup-MMA policy of the packed-filter fused kernel
/// (device::conv2d_reduce_packed): `wgmma.mma_async` with both operands in shared memory.
///
/// A block (persistent: one per SM, looping over tiles) of two consumer warpgroups and a producer
/// warpgroup computes tiles of tile_h x 64 output pixels (rows x columns of one image) by all K output
/// channels, in channel passes of 128 (K > 128: the stages of each pass stage the patch again, the
/// reduction state stays in registers). Per stage of `block_c` input channels, one producer thread copies with TMA the input
/// patch ((tile_h+R-1) x (64+S-1) pixels, fp32 as given, zero outside the image: each x element is loaded once per
/// tile, not R*S times as in im2col) into `RawStages` raw buffers, and with a bulk copy the stage's
/// R*S x 128 x block_c slice of the packed filter (raw buffers hold raw_c = 8 channels: a 16-channel stage
/// is two of them); the other three producer warps convert the raw patch
/// once (TF32 round-to-nearest-even, the 3xTF32 split, bf16 or fp16) into pixel-major planes
/// (block::conv_patch_loader); each consumer warpgroup then issues, as one commit group, an m64n128 wgmma
/// per filter tap and output row with the A descriptor shifted by the tap (block::conv_mainloop_wgmma).
/// `Stages` operand stages, synchronised by mbarriers. `fallback` is the mma.sync policy used where this
/// kernel cannot serve a problem (see device::packed_filter_bytes).
/// `PingPong` = false (cooperative): both consumer warpgroups work on one 4 x 64 tile (two rows each) and
/// run its epilogue together, the tensor cores idle meanwhile. `PingPong` = true: tiles of 2 x 64 pixels,
/// the block's tiles taken alternately by the two warpgroups, so that one warpgroup's epilogue runs while
/// the other's wgmmas keep the tensor cores busy (as CUTLASS's ping-pong Hopper GEMM schedules). It reads
/// (2+R-1)/2 input rows per output row instead of (4+R-1)/4 and the filter per 128 pixels instead of 256,
/// so it can pay only when the filter is resident in shared memory (bf16/fp16 with C*R*S*K*2 bytes of
/// ~144 KB or less). Measured on the seed problem (bench/NOTES.md, "Cycle counts, transform, 4 stages"):
/// correct, but not faster than the cooperative schedule (the producer's extra rows become the bound), so
/// no default policy uses it.
/// `Producers` = 2: two producer warpgroups (512 threads per block): one thread issues the TMA copies, one
/// the filter copies, and 224 threads convert the raw patch (96 with one producer warpgroup), so each raw
/// buffer's conversion is one round of work items instead of two; the consumers then get 184 registers
/// instead of 216 (the register file: 2*128*184 + 2*128*72 = 65536). On the seed problem that made bf16 and
/// fp16 faster; not tf32 (its consumers, not the conversion, are the bound) and tf32x3 was slower (its
/// consumers spill at 184 registers) (bench/NOTES.md, "Moved from header comments"), so the bf16 and fp16
/// defaults use two and the others one.
template <class Math, int Stages = 3, int RawStages = 2, bool PingPong = false, int Producers = 1>
struct wgmma_policy {
  using math = Math;                           ///< precision tag (tf32, tf32x3, bf16 or fp16)
  static constexpr bool pingpong = PingPong;   ///< one tile per consumer warpgroup, alternating
  static constexpr int tile_h = PingPong ? 2 : 4;  ///< output rows per tile
  static constexpr int tile_w = 64;            ///< output columns per tile (one m64 wgmma row segment)
  static constexpr int block_m = tile_h * tile_w;  ///< output pixels per tile (GEMM_M)
  static constexpr int block_n = 128;          ///< output channels per channel pass (GEMM_N tile)
  static constexpr int consumer_threads = 256; ///< two warpgroups (wgmma, epilogue, reduction)
  static constexpr int producer_threads = 128 * Producers;  ///< one or two producer warpgroups
  static constexpr int threads = consumer_threads + producer_threads;  ///< 384 or 512
  /// registers per consumer thread after `setmaxnreg` with this policy's Producers (wgmma_consumer_registers)
  static constexpr int consumer_registers = wgmma_consumer_registers(Producers);
  /// registers per producer thread after `setmaxnreg` (the transform holds E 16-byte loads and their 4
  /// converted plane entries)
  static constexpr int producer_registers = wgmma_producer_registers;
  /// producer warpgroups of the gathering kernel variant (stride 2, W % 4 != 0: the producer threads load x
  /// with plain loads, latency-bound, so twice the threads keep twice the loads in flight): two, except under
  /// 3xTF32, whose consumers spill at 184 registers (then Producers) (bench/NOTES.md, "Moved from header
  /// comments").
  static constexpr int gather_producers = std::is_same_v<Math, convred::math::tf32x3> ? Producers : 2;
  static constexpr int stages = Stages;        ///< operand stages (filter slice + planes)
  static constexpr int raw_stages = RawStages; ///< raw patch buffers (TMA destination, raw_c channels each)
  static constexpr bool tensor_core = true;    ///< tensor-core math
  /// tf32 or tf32x3 (one fp32 operand per k), else bf16/fp16 (pairs)
  static constexpr bool is_tf32 = std::is_same_v<Math, convred::math::tf32> || std::is_same_v<Math, convred::math::tf32x3>;
  /// wgmma depth: 8 for tf32/tf32x3 (m64n128k8), 16 for bf16/fp16 (m64n128k16); also the input channels
  /// per stage (one wgmma per filter tap and output row)
  static constexpr int block_c = is_tf32 ? 8 : 16;
  /// input channels per raw patch buffer (one TMA box): 8, so that a bf16/fp16 stage (16 channels) is
  /// two raw buffers, each converted while the next one lands
  static constexpr int raw_c = 8;
  /// packed filter parts: 2 for tf32x3 (big and small), else 1
  static constexpr int parts = std::is_same_v<Math, convred::math::tf32x3> ? 2 : 1;
  static constexpr int filter_elem_bytes = is_tf32 ? 4 : 2;  ///< bytes per packed filter element
  using fallback = typename default_mma_sync_policy<Math>::type;   ///< policy where the wgmma kernel cannot serve
  static_assert(std::is_same_v<Math, convred::math::tf32> || std::is_same_v<Math, convred::math::tf32x3> ||
                    std::is_same_v<Math, convred::math::bf16> || std::is_same_v<Math, convred::math::fp16>,
                "wgmma_policy: math must be tf32, tf32x3, bf16 or fp16");
  static_assert(Stages >= 2, "wgmma_policy: at least two operand stages");
  static_assert(RawStages >= 1, "wgmma_policy: at least one raw patch buffer");
  static_assert(Producers == 1 || Producers == 2, "wgmma_policy: one or two producer warpgroups");
  static_assert(wgmma_registers_fit(Producers) && wgmma_registers_fit(gather_producers),
                "wgmma_policy: the registers after setmaxnreg exceed what the block is launched with");
};

/// @brief True for wgmma_policy<...> types (the policies the packed-filter entry points take).
template <class P>
struct is_wgmma_policy : std::false_type {};
/// @brief wgmma_policy<Math, Stages, RawStages, PingPong, Producers> is a wgmma policy.
template <class Math, int Stages, int RawStages, bool PingPong, int Producers>
struct is_wgmma_policy<wgmma_policy<Math, Stages, RawStages, PingPong, Producers>> : std::true_type {};
/// @brief The ping-pong sibling of a wgmma_policy: the same math, stages, raw buffers and producers with
/// PingPong = true (tiles of 2 x 64 pixels, one per consumer warpgroup). conv2d_reduce_plan runs it where
/// its 128-pixel tiles replace a split-K fixup (conv2d_reduce_plan::choose_pingpong).
template <class P>
struct wgmma_pingpong;
/// @brief wgmma_pingpong of wgmma_policy<Math, Stages, RawStages, PingPong, Producers>.
template <class Math, int Stages, int RawStages, bool PingPong, int Producers>
struct wgmma_pingpong<wgmma_policy<Math, Stages, RawStages, PingPong, Producers>> {
  using type = wgmma_policy<Math, Stages, RawStages, true, Producers>;  ///< the ping-pong sibling
};

/// @brief Whether P is a wgmma_policy (the value of the is_wgmma_policy trait).
template <class P>
inline constexpr bool is_wgmma_policy_v = is_wgmma_policy<P>::value;

/// @brief Default wgmma policy of a math tag, all cooperative: 4 operand stages and 2 raw buffers. Seed
/// problem: tf32 stages of 48.4 KB (filter slice and planes), raw buffers of 12.75 KB, 220 KB in all;
/// bf16/fp16 the 144 KB filter resident, stages of 12.4 KB of planes, the same raw buffers. The fourth
/// stage gives the producer two stage-times, not one, to refill a released stage (bench/NOTES.md).
/// tf32x3: 2 operand stages of 96.8 KB (filter and planes twice) and 1 raw buffer. bf16 and fp16 run
/// two producer warpgroups (their conversion, not the tensor cores, was the bound; see wgmma_policy).
template <class Math>
struct default_wgmma_policy {
  using type = wgmma_policy<Math, 4, 2>;  ///< the default wgmma_policy for Math
};
/// @brief Default bf16 wgmma policy: 4 operand stages, 2 raw buffers, two producer warpgroups.
template <>
struct default_wgmma_policy<math::bf16> {
  using type = wgmma_policy<math::bf16, 4, 2, false, 2>;  ///< the default wgmma_policy for bf16
};
/// @brief Default fp16 wgmma policy: 4 operand stages, 2 raw buffers, two producer warpgroups.
template <>
struct default_wgmma_policy<math::fp16> {
  using type = wgmma_policy<math::fp16, 4, 2, false, 2>;  ///< the default wgmma_policy for fp16
};
/// @brief Default 3xTF32 wgmma policy: 2 operand stages, 1 raw buffer.
template <>
struct default_wgmma_policy<math::tf32x3> {
  using type = wgmma_policy<math::tf32x3, 2, 1>;  ///< the default wgmma_policy for tf32x3
};

/// @brief Tag meaning "choose the default policy" in device entry points: the exact SIMT policy
/// (math::ieee) for the element type. Pass `default_policy_for<math::tf32>` etc. for tensor cores.
struct default_policy {};

/// @brief Tag choosing the default policy of a math tag (ieee: default_simt_policy<T>; tf32, tf32x3,
/// bf16, fp16: default_mma_sync_policy<Math>).
template <class Math>
struct default_policy_for {};

namespace detail {
template <class Policy, class T>
struct resolve_policy {
  using type = Policy;
};
template <class T>
struct resolve_policy<default_policy, T> {
  using type = typename default_simt_policy<T>::type;
};
template <class T>
struct resolve_policy<default_policy_for<math::ieee>, T> {
  using type = typename default_simt_policy<T>::type;
};
template <class Math, class T>
struct resolve_policy<default_policy_for<Math>, T> {
  using type = typename default_mma_sync_policy<Math>::type;
};
template <class Policy, class T>
using resolve_policy_t = typename resolve_policy<Policy, T>::type;
}  // namespace detail

}  // namespace convred
