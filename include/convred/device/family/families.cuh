/// @file device/family/families.cuh
/// @brief convred's kernel families and the planner's default list for an element type and math.
#pragma once

#include <type_traits>

#include "dilated.cuh"
#include "direct.cuh"
#include "family.cuh"
#include "grouped.cuh"
#include "mma_narrow.cuh"
#include "mma_sync.cuh"
#include "pruned.cuh"
#include "simt.cuh"
#include "simt_narrow.cuh"
#include "tiny.cuh"
#include "wgmma.cuh"

namespace convred::device::family {

/// @brief The families conv2d_reduce_plan<T, Math> considers, best first: the direct family (exact, for
/// C/groups == 1 under every math; for grouped layers with C/groups <= 16 always under math::ieee, on
/// double data and below sm_80, else where it unrolls the filter and its model estimates it faster; for
/// dense layers with C <= 16 under TF32 and 3xTF32 where it unrolls the filter, the tiny family does not
/// serve them and its model estimates it faster); then,
/// for a tensor-core math (math::accurate on float, half or bf16 data included), the tiny family for groups
/// 1, 32 or fewer output pixels and at most 512 im2col values (exact FMA: one kernel sized for them), the
/// narrow family for at most 16, then 17 to 32 output channels per group under 3xTF32 where its estimate
/// beats the tensor-core families' (exact FMA in 16- and 32-channel tiles; under math::ieee where it beats
/// the SIMT family's), the narrow tensor-core family for at most 32 output channels per group under TF32, bf16 and
/// fp16 where its estimate beats theirs (the mma.sync kernel in 32-channel tiles), the
/// wgmma family (sm_90a) for layers whose outer taps read only padding (family::pruned: the smaller filter
/// of the other taps), for dilated layers at stride 1 (family::dilated: space to batch) and for grouped
/// layers with wide groups (family::grouped: one group at a time), each where its estimate beats the
/// mma.sync family's on the whole problem (their inner wgmma family: wgmma_role::adapter); the wgmma family
/// itself and the mma.sync family (sm_80+); last the SIMT family (exact FMA: math::ieee, double data,
/// math::accurate on GPUs older than sm_80).
template <class T, class Math>
using default_families_t =
    std::conditional_t<std::is_same_v<kernel_math_t<T, Math>, math::ieee>,
                       family_list<direct<T, Math>, simt_narrow<T, Math>, simt_narrow<T, Math, 32>, simt<T, Math>>,
                       family_list<direct<T, Math>, tiny<T, Math>, simt_narrow<T, Math>, simt_narrow<T, Math, 32>, mma_narrow<T, Math>,
                                   pruned<wgmma<T, Math, wgmma_role::adapter>, mma_sync<T, Math>>,
                                   dilated<wgmma<T, Math, wgmma_role::adapter>, mma_sync<T, Math>>,
                                   grouped<wgmma<T, Math, wgmma_role::adapter>, mma_sync<T, Math>>, wgmma<T, Math>,
                                   mma_sync<T, Math>, simt<T, Math>>>;

}  // namespace convred::device::family
