// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// Kernels for halo's local (CPU) driver.
//
// A local executable is an ELF shared object whose entry points have the
// signature `void entry(const halo_dispatch_state_t *state)`; compile it
// with `cc -shared -fPIC -O2` and load it with halo_executable_create
// (HALO_EXECUTABLE_FORMAT_ELF). The daemon calls the entry once per
// workgroup (possibly on several threads at once); |args| holds pointers to
// the argument values exactly like CUDA's kernelParams: for a BUFFER
// argument, args[i] points at a void* (the buffer's address); for a
// CONSTANT, at its bytes; for BINDING_TABLE, at a uint64_t* table.
//
// An entry may declare its parameters, one size in bytes each, in order (8
// for a BUFFER or BINDING_TABLE argument: a pointer):
//   HALO_LOCAL_KERNEL_PARAMS(add, 8, 8, 8, 4);
// halod then checks every dispatch of it at record time (argument count and
// sizes, as on CUDA) and reports the list to halo_executable_parameters.
// The declaration is an exported object named halo_local_params_<entry>;
// HALO_LOCAL_KERNEL_NO_PARAMS(name) declares an entry of no parameters.
// Without one, the parameters are unknown: dispatches are not checked and
// halo_executable_parameters returns UNIMPLEMENTED.
//
// Example:
//   HALO_LOCAL_KERNEL_PARAMS(add, 8, 8, 8, 4);
//   HALO_LOCAL_KERNEL(add) {
//     const float *a = HALO_ARG(state, 0, const float *);
//     float *c = HALO_ARG(state, 2, float *);
//     uint32_t n = HALO_ARG(state, 3, uint32_t);
//     uint32_t i0 = state->workgroup_id[0] * state->workgroup_size[0];
//     ...
//   }
#ifndef HALO_LOCAL_KERNEL_H_
#define HALO_LOCAL_KERNEL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct halo_dispatch_state_t {
  void *const *args;  // arg_count pointers to argument values
  uint32_t arg_count;
  uint32_t workgroup_id[3];
  uint32_t workgroup_count[3];
  uint32_t workgroup_size[3];
  void *shared_memory;  // shared_memory_bytes of scratch, per workgroup
  uint32_t shared_memory_bytes;
} halo_dispatch_state_t;

// C linkage in C++ too, so that halod finds each symbol by its plain name.
#ifdef __cplusplus
#define HALO_LOCAL_LINKAGE extern "C"
#else
#define HALO_LOCAL_LINKAGE
#endif
// The earlier name of HALO_LOCAL_LINKAGE.
#define HALO_LOCAL_PARAMS_LINKAGE HALO_LOCAL_LINKAGE

#define HALO_LOCAL_KERNEL(name)                                        \
  HALO_LOCAL_LINKAGE __attribute__((visibility("default"))) void name( \
      const halo_dispatch_state_t *state)

// A kernel's declared parameters (HALO_LOCAL_KERNEL_PARAMS).
#define HALO_LOCAL_MAX_PARAMS 64
typedef struct halo_local_kernel_params_t {
  uint32_t count;
  uint32_t sizes[HALO_LOCAL_MAX_PARAMS];
} halo_local_kernel_params_t;

// How many sizes a HALO_LOCAL_KERNEL_PARAMS lists: C counts a compound
// literal's elements, which ISO C++ has not; C++ counts the arguments of a
// function template (halo_local_param_count, below the C block).
#ifdef __cplusplus
#define HALO_LOCAL_PARAM_COUNT(...) halo_local_param_count(__VA_ARGS__)
#else
#define HALO_LOCAL_PARAM_COUNT(...) \
  (sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))
#endif
#define HALO_LOCAL_KERNEL_PARAMS(name, ...)                     \
  HALO_LOCAL_LINKAGE __attribute__((visibility("default")))     \
  const halo_local_kernel_params_t halo_local_params_##name = { \
      HALO_LOCAL_PARAM_COUNT(__VA_ARGS__), {__VA_ARGS__}}
#define HALO_LOCAL_KERNEL_NO_PARAMS(name)                   \
  HALO_LOCAL_LINKAGE __attribute__((visibility("default"))) \
  const halo_local_kernel_params_t halo_local_params_##name = {0, {0}}

// The value of argument |index| as |type|.
#ifdef __cplusplus
#define HALO_ARG(state, index, type) \
  (*static_cast<type const *>((state)->args[index]))
#else
#define HALO_ARG(state, index, type) (*(type const *)(state)->args[index])
#endif

#ifdef __cplusplus
}

template <typename... T>
constexpr uint32_t halo_local_param_count(T...) {
  return static_cast<uint32_t>(sizeof...(T));
}
#endif

#endif  // HALO_LOCAL_KERNEL_H_
