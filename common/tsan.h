// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// ThreadSanitizer annotations, for orders and accesses that TSan cannot
// judge: each use says why. They compile to nothing unless halo is built
// with -fsanitize=thread (HALO_SANITIZE=thread).
//
// Thread-safe.
#ifndef HALO_COMMON_TSAN_H_
#define HALO_COMMON_TSAN_H_

#if defined(__SANITIZE_THREAD__)
#define HALO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HALO_TSAN 1
#endif
#endif

#if defined(HALO_TSAN)
// The TSan runtime's (sanitizer/tsan_interface.h declares the first two).
void __tsan_acquire(void *address);
void __tsan_release(void *address);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
// Everything this thread did before a HALO_TSAN_RELEASE(|address|) happens
// before what a thread does after a later HALO_TSAN_ACQUIRE(|address|).
#define HALO_TSAN_RELEASE(address) __tsan_release((void *)(address))
#define HALO_TSAN_ACQUIRE(address) __tsan_acquire((void *)(address))
// This thread's memory accesses in between are not tracked (its locks
// still are).
#define HALO_TSAN_IGNORE_BEGIN() __tsan_ignore_thread_begin()
#define HALO_TSAN_IGNORE_END() __tsan_ignore_thread_end()
#else
#define HALO_TSAN_RELEASE(address) ((void)(address))
#define HALO_TSAN_ACQUIRE(address) ((void)(address))
#define HALO_TSAN_IGNORE_BEGIN() ((void)0)
#define HALO_TSAN_IGNORE_END() ((void)0)
#endif

#endif  // HALO_COMMON_TSAN_H_
