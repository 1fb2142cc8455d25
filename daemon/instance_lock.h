// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The halo Authors
// One halod per client socket: a lock taken before any socket is touched.
//
// The lock is an open file description (OFD) write lock, fcntl F_OFD_SETLK
// F_WRLCK over the whole of a lock file beside the client socket
// (PATH.lock for ipc://PATH, mode 0600), held until halod's process ends:
// a SIGKILL releases it too, and the file left behind is taken again by
// the next halod. Its descriptor is close-on-exec, so the device workers
// (posix_spawn) never hold it. With it, two halods started at the same
// moment on one socket cannot both go on to remove stale sockets and bind:
// the connect probe of the fd channel (daemon/fd_server.h) alone could not
// tell a socket bound but not yet listening from a stale one.
//
// A client must not be able to take it, or it could block every start of
// halod. A write lock needs a descriptor open for writing, which clients
// never get (checked with real processes on Linux 6.18, as root in a
// mount namespace of its own with the directory bind-mounted read-only;
// integration.instance_lock_test checks it at each run as root): a non-root
// client cannot open a 0600 file of halod's user at all (EACCES); root in a
// client pod that mounts the socket directory read-only gets EROFS for O_RDWR,
// and EBADF for a write lock through an O_RDONLY descriptor. But such a root
// CAN open the file O_RDONLY and take a READ lock (F_RDLCK), which blocks
// halod's write lock just as well (EAGAIN), and it can wait for one
// (F_OFD_SETLKW) to take it the moment a halod ends. So:
//
// - A new lock file is created unnamed (O_TMPFILE), write-locked, and only
//   then linked in under its name (EEXIST where a file is there): nobody
//   can open a lock file before its halod has locked it. Where the file
//   system has no unnamed files (overlayfs before Linux 6.6) it is created
//   under a random name of its own first (PATH.new.RANDOM, exclusively),
//   locked, linked and unlinked; a reader quick enough to lock that file
//   first only makes halod try again.
// - A halod that finds the lock file held by read locks only (F_OFD_GETLK)
//   knows that no halod holds it (a halod holds a read lock only while it
//   replaces a file, as follows), and replaces it: it takes a read lock of
//   its own on it (no halod can then write-lock that file), takes the lock
//   NAME.INODE (the same procedure, one level down: the right to replace
//   that one file, which one halod holds at a time), checks that NAME
//   still names that file, and renames the file of NAME.INODE, which it
//   holds, over NAME. A reader only ever holds a file no halod needs.
// - A halod holds the lock once it holds a write lock on the file NAME
//   names (checked after the lock: the file may have been replaced).
// tests/unit/instance_lock_race_test.c has processes take it over and over
// under readers, one holder at a time.
//
// Only a process that may write in the socket directory (root on a
// read-write mount, halod's user) can defeat this; it can remove the
// sockets themselves too.
//
// Loop thread (halod_start), before anything else.
#ifndef HALOD_INSTANCE_LOCK_H_
#define HALOD_INSTANCE_LOCK_H_

#include "common/status.h"

// Takes the lock of client socket |listen| (ipc://PATH: PATH.lock) and keeps
// it until the process exits; |fd_channel_path| is probed to name the
// halod holding it. FAILED_PRECONDITION where another halod holds it (the
// message names the lock file and, where its fd channel answers, its pid);
// the errno where the lock file cannot be created or opened (a directory
// halod may not write in: it could not bind its sockets there either; a
// lock file of another user's): halod does not start then, rather than
// start without the lock. A second call in one process does nothing.
halo_status_t halod_instance_lock_take(const char *listen,
                                       const char *fd_channel_path);

#endif  // HALOD_INSTANCE_LOCK_H_
