/// @file version.cuh
/// @brief convred's version as preprocessor macros (CMake's `project(convred VERSION ...)` is read from
/// this file, so the two cannot disagree).
///
/// Versioning follows semantic versioning: the major number changes with incompatible API changes; while
/// it is 0, a minor release may change the API too (see CHANGELOG.md).
#pragma once

/// Major version (incompatible API changes).
#define CONVRED_VERSION_MAJOR 0
/// Minor version (new features; before 1.0 also API changes).
#define CONVRED_VERSION_MINOR 1
/// Patch version (fixes only).
#define CONVRED_VERSION_PATCH 0

/// The version as one integer, MAJOR * 100000 + MINOR * 100 + PATCH (CUB's and Thrust's scheme), for
/// comparisons such as `#if CONVRED_VERSION >= 100` (0.1.0).
#define CONVRED_VERSION (CONVRED_VERSION_MAJOR * 100000 + CONVRED_VERSION_MINOR * 100 + CONVRED_VERSION_PATCH)
