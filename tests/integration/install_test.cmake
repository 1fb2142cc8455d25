# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
# integration.install_test: `cmake --install` into a scratch prefix puts the
# binaries, the library, the headers, the pkg-config file, the systemd
# files, the example configuration and the man pages in their places.
#   cmake -DBUILD_DIR=... -DPREFIX=... -P install_test.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}"
                        --prefix "${PREFIX}"
                RESULT_VARIABLE result OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${result}):\n${output}")
endif()
include(GNUInstallDirs)
set(expected
  bin/halod
  bin/haloctl
  ${CMAKE_INSTALL_LIBDIR}/libhalo.so
  ${CMAKE_INSTALL_LIBDIR}/libhalo.a
  ${CMAKE_INSTALL_LIBDIR}/pkgconfig/halo.pc
  ${CMAKE_INSTALL_INCLUDEDIR}/halo/halo.h
  ${CMAKE_INSTALL_INCLUDEDIR}/halo/status.h
  ${CMAKE_INSTALL_INCLUDEDIR}/halo/local_kernel.h
  lib/systemd/system/halod.service
  lib/sysusers.d/halo.conf
  lib/tmpfiles.d/halo.conf
  etc/halo/halod.conf
  ${CMAKE_INSTALL_DATAROOTDIR}/doc/halo/examples/halod.conf
  ${CMAKE_INSTALL_MANDIR}/man1/haloctl.1
  ${CMAKE_INSTALL_MANDIR}/man5/halod.conf.5
  ${CMAKE_INSTALL_MANDIR}/man8/halod.8)
set(missing "")
foreach(path ${expected})
  if(NOT EXISTS "${PREFIX}/${path}")
    list(APPEND missing "${path}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "not installed under ${PREFIX}: ${missing}")
endif()
# An operator's configuration is never overwritten.
file(WRITE "${PREFIX}/etc/halo/halod.conf" "log-level = debug\n")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}"
                        --prefix "${PREFIX}"
                RESULT_VARIABLE result OUTPUT_QUIET ERROR_QUIET)
file(READ "${PREFIX}/etc/halo/halod.conf" config)
if(NOT result EQUAL 0 OR NOT config STREQUAL "log-level = debug\n")
  message(FATAL_ERROR "a second install replaced etc/halo/halod.conf")
endif()
file(REMOVE_RECURSE "${PREFIX}")
message(STATUS "1 passed, 0 failed")
