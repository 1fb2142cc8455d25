// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A checked vector add through libhalo (see the header).
#include "checked_add.h"

#include <inttypes.h>
#include <string.h>

#define N HALO_CHECKED_ADD_N

halo_status_t halo_checked_add_open(halo_checked_add_t *add,
                                    halo_client_t *client,
                                    halo_executable_t *executable) {
  memset(add, 0, sizeof(*add));
  halo_status_t status = NULL;
  halo_buffer_t **buffers[3] = {&add->a, &add->b, &add->c};
  for (int i = 0; i < 3 && !status; ++i) {
    status = halo_buffer_create(client, 0, HALO_MEMORY_HOST_VISIBLE,
                                N * sizeof(float), 0, buffers[i]);
  }
  if (!status) status = halo_semaphore_create(client, 0, 0, &add->done);
  if (!status) {
    status = halo_command_buffer_begin(client, 0, HALO_COMMAND_BUFFER_REUSABLE,
                                       3, &add->cb);
  }
  if (!status) {
    uint32_t n = N;
    uint64_t bytes = N * sizeof(float);
    halo_dispatch_arg_t args[4] = {
        {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(0, 0, bytes), NULL, 0},
        {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(1, 0, bytes), NULL, 0},
        {HALO_DISPATCH_ARG_BUFFER, halo_binding_ref(2, 0, bytes), NULL, 0},
        {HALO_DISPATCH_ARG_CONSTANT, {0}, &n, sizeof(n)},
    };
    halo_dispatch_params_t params = {
        .executable = executable,
        .entry = "add",
        .grid = {(N + 63) / 64, 1, 1},
        .block = {64, 1, 1},
        .args = args,
        .arg_count = 4,
    };
    status = halo_command_buffer_dispatch(add->cb, &params);
  }
  if (!status) status = halo_command_buffer_end(add->cb);
  return status;
}

halo_status_t halo_checked_add_step(halo_checked_add_t *add, uint64_t step,
                                    int64_t timeout_ns) {
  float *a = halo_buffer_host_pointer(add->a);
  float *b = halo_buffer_host_pointer(add->b);
  float *c = halo_buffer_host_pointer(add->c);
  for (uint32_t i = 0; i < N; ++i) {
    a[i] = (float)(i + step % 1000);
    b[i] = (float)(2 * i);
    c[i] = -1.0f;
  }
  halo_binding_t bindings[3] = {{add->a, 0, HALO_WHOLE_BUFFER},
                                {add->b, 0, HALO_WHOLE_BUFFER},
                                {add->c, 0, HALO_WHOLE_BUFFER}};
  halo_semaphore_value_t signal = {add->done, add->value + 1};
  halo_status_t status =
      halo_queue_execute(NULL, add->cb, bindings, 3, NULL, 0, &signal, 1);
  if (status) {
    return halo_status_annotate(status, "step %" PRIu64 ": execute", step);
  }
  ++add->value;
  status = halo_semaphore_wait(add->done, add->value, timeout_ns);
  if (status) {
    return halo_status_annotate(status, "step %" PRIu64 ": wait", step);
  }
  for (uint32_t i = 0; i < N; ++i) {
    float expected = (float)(3 * i + step % 1000);
    if (c[i] != expected) {
      return halo_status_make(HALO_STATUS_INTERNAL,
                              "step %" PRIu64 ": c[%u] = %f, expected %f", step,
                              i, (double)c[i], (double)expected);
    }
  }
  return NULL;
}
