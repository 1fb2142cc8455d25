// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A library that starts a thread when it is loaded, as a library NVRTC
// loads could: preloaded (LD_PRELOAD) into halo-nvrtc, whose compile must
// then be refused, since that thread would run outside the sandbox the
// process enters after loading NVRTC (hal_cuda_nvrtc_test).
#include <pthread.h>
#include <unistd.h>

static void *halo_test_thread_at_load_main(void *argument) {
  (void)argument;
  for (;;) pause();
  return NULL;
}

__attribute__((constructor)) static void halo_test_thread_at_load(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, halo_test_thread_at_load_main, NULL) == 0) {
    pthread_detach(thread);
  }
}
