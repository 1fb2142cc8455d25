// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// A TCP socket whose last close blocks: what a client can hand halod to
// make a thread of it wait (daemon/fd_closer.h).
#ifndef HALO_TESTS_SUPPORT_LINGERING_SOCKET_H_
#define HALO_TESTS_SUPPORT_LINGERING_SOCKET_H_

// A TCP socket whose last close waits |linger_s| seconds: connected over
// loopback to a listener that never accepts, its send queue full,
// SO_LINGER on. |*out_listener|: the listener, for the caller to close
// after. Fails the test (cmocka) if a step fails.
int halo_test_lingering_socket(int linger_s, int *out_listener);

#endif  // HALO_TESTS_SUPPORT_LINGERING_SOCKET_H_
