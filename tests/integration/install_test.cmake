# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
# integration.install_test: `cmake --install` puts every file in its place,
# once, for the ways an install is made:
#   1. --prefix PREFIX (a scratch prefix): binaries, library, headers,
#      pkg-config file, CMake package, systemd files, example configuration
#      and man pages under PREFIX; a second install keeps an edited
#      configuration.
#   2. DESTDIR=STAGE with the configured prefix (/usr/local by default):
#      every file lands under STAGE exactly once (never STAGE/STAGE/...), the
#      configuration in STAGE/usr/local/etc/halo.
#   3. DESTDIR=STAGE --prefix /usr (what a distribution package does): the
#      configuration in STAGE/etc/halo, nothing in STAGE/usr/etc.
# In 2 and 3 the installed unit's ExecStart names a halod and a
# configuration file that exist in the install tree.
#   cmake -DBUILD_DIR=... -DPREFIX=... -P install_test.cmake
#   (and -DLIBDIR, -DINCLUDEDIR, -DDATAROOTDIR, -DMANDIR: the configured
#   CMAKE_INSTALL_* directories)
set(passes 0)

# install(OUT_VAR DESTDIR ARGS...): runs cmake --install BUILD_DIR ARGS with
# DESTDIR (empty: none); fails the test on an error.
function(halo_install destdir)
  if(destdir)
    set(environment ${CMAKE_COMMAND} -E env DESTDIR=${destdir})
  else()
    set(environment ${CMAKE_COMMAND} -E env --unset=DESTDIR)
  endif()
  execute_process(COMMAND ${environment} ${CMAKE_COMMAND} --install
                          "${BUILD_DIR}" ${ARGN}
                  RESULT_VARIABLE result OUTPUT_VARIABLE output
                  ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "DESTDIR=${destdir} cmake --install ${ARGN} failed "
                        "(${result}):\n${output}")
  endif()
endfunction()

# check_files(ROOT PATHS...): every path exists under ROOT.
function(check_files root)
  set(missing "")
  foreach(path ${ARGN})
    if(NOT EXISTS "${root}/${path}")
      list(APPEND missing "${path}")
    endif()
  endforeach()
  if(missing)
    message(FATAL_ERROR "not installed under ${root}: ${missing}")
  endif()
endfunction()

# check_manifest(STAGE): install_manifest.txt (which names each file
# without DESTDIR) names every file installed under STAGE once, and nothing
# else: no entry names STAGE itself (a destination that already held
# DESTDIR would be installed under STAGE/STAGE/...).
function(check_manifest stage)
  file(STRINGS "${BUILD_DIR}/install_manifest.txt" manifest)
  list(LENGTH manifest count)
  set(unique ${manifest})
  list(REMOVE_DUPLICATES unique)
  list(LENGTH unique unique_count)
  if(NOT count EQUAL unique_count)
    message(FATAL_ERROR "install_manifest.txt names a file twice")
  endif()
  set(expected "")
  foreach(path ${manifest})
    string(FIND "${path}" "${stage}" found)
    if(NOT found EQUAL -1 OR NOT IS_ABSOLUTE "${path}")
      message(FATAL_ERROR "installed with DESTDIR=${stage} in its "
                          "destination (so under it twice): ${path}")
    endif()
    list(APPEND expected "${stage}${path}")
  endforeach()
  file(GLOB_RECURSE installed LIST_DIRECTORIES false "${stage}/*")
  list(SORT installed)
  list(SORT expected)
  if(NOT installed STREQUAL expected)
    set(extra ${installed})
    list(REMOVE_ITEM extra ${expected})
    set(absent ${expected})
    list(REMOVE_ITEM absent ${installed})
    message(FATAL_ERROR "DESTDIR=${stage}: the files installed are not "
                        "those of install_manifest.txt:\nnot in the "
                        "manifest: ${extra}\nnot installed: ${absent}")
  endif()
  message(STATUS "DESTDIR=${stage}: ${count} files, each once")
endfunction()

# check_unit(STAGE UNIT CONFIG): the installed unit's ExecStart names
# a halod and --config CONFIG, both present under STAGE.
function(check_unit stage unit config)
  file(STRINGS "${stage}/${unit}" exec_start REGEX "^ExecStart=")
  if(NOT exec_start MATCHES "^ExecStart=([^ ]+) --config ([^ ]+)$")
    message(FATAL_ERROR "${unit}: no 'ExecStart=HALOD --config FILE': "
                        "${exec_start}")
  endif()
  set(halod "${CMAKE_MATCH_1}")
  set(named_config "${CMAKE_MATCH_2}")
  if(NOT named_config STREQUAL config)
    message(FATAL_ERROR "${unit} reads ${named_config}, expected ${config}")
  endif()
  foreach(path "${halod}" "${named_config}")
    if(NOT EXISTS "${stage}${path}")
      message(FATAL_ERROR "${unit} names ${path}, not installed "
                          "(${stage}${path})")
    endif()
  endforeach()
  message(STATUS "${unit}: ${halod} --config ${named_config}, both installed")
endfunction()

# check_pc(FILE PREFIX): halo.pc at FILE names PREFIX as its prefix, the
# prefix of the install that put it there (not the configured one).
function(check_pc file prefix)
  file(STRINGS "${file}" named REGEX "^prefix=")
  if(NOT named STREQUAL "prefix=${prefix}")
    message(FATAL_ERROR "${file} says '${named}', expected prefix=${prefix}")
  endif()
  message(STATUS "${file}: prefix=${prefix}")
endfunction()

# ---- 1. --prefix PREFIX
file(REMOVE_RECURSE "${PREFIX}")
halo_install("" --prefix "${PREFIX}")
check_files("${PREFIX}"
  bin/halod
  bin/haloctl
  ${LIBDIR}/libhalo.so
  ${LIBDIR}/libhalo.so.1
  ${LIBDIR}/libhalo.so.1.0.0
  ${LIBDIR}/libhalo.a
  ${LIBDIR}/pkgconfig/halo.pc
  ${LIBDIR}/cmake/halo/haloConfig.cmake
  ${LIBDIR}/cmake/halo/haloConfigVersion.cmake
  ${LIBDIR}/cmake/halo/haloTargets.cmake
  ${INCLUDEDIR}/halo/halo.h
  ${INCLUDEDIR}/halo/status.h
  ${INCLUDEDIR}/halo/local_kernel.h
  lib/systemd/system/halod.service
  lib/sysusers.d/halo.conf
  lib/tmpfiles.d/halo.conf
  etc/halo/halod.conf
  ${DATAROOTDIR}/doc/halo/examples/halod.conf
  ${DATAROOTDIR}/doc/halo/LICENSE
  ${MANDIR}/man1/haloctl.1
  ${MANDIR}/man5/halod.conf.5
  ${MANDIR}/man8/halod.8)
check_unit("" "${PREFIX}/lib/systemd/system/halod.service"
           "${PREFIX}/etc/halo/halod.conf")
check_pc("${PREFIX}/${LIBDIR}/pkgconfig/halo.pc" "${PREFIX}")
# An operator's configuration is never overwritten.
file(WRITE "${PREFIX}/etc/halo/halod.conf" "log-level = debug\n")
halo_install("" --prefix "${PREFIX}")
file(READ "${PREFIX}/etc/halo/halod.conf" config)
if(NOT config STREQUAL "log-level = debug\n")
  message(FATAL_ERROR "a second install replaced etc/halo/halod.conf")
endif()
file(REMOVE_RECURSE "${PREFIX}")
math(EXPR passes "${passes} + 1")

# ---- 2. DESTDIR with the configured prefix
file(STRINGS "${BUILD_DIR}/CMakeCache.txt" configured
     REGEX "^CMAKE_INSTALL_PREFIX:")
string(REGEX REPLACE "^[^=]*=" "" configured "${configured}")
set(stage "${PREFIX}-destdir")
file(REMOVE_RECURSE "${stage}")
halo_install("${stage}")
check_manifest("${stage}")
if(configured STREQUAL "/usr")
  set(config /etc/halo/halod.conf)
else()
  set(config ${configured}/etc/halo/halod.conf)
endif()
check_unit("${stage}" "${configured}/lib/systemd/system/halod.service"
           "${config}")
file(REMOVE_RECURSE "${stage}")
math(EXPR passes "${passes} + 1")

# ---- 3. DESTDIR with --prefix /usr
file(REMOVE_RECURSE "${stage}")
halo_install("${stage}" --prefix /usr)
check_manifest("${stage}")
check_files("${stage}" etc/halo/halod.conf usr/bin/halod usr/${LIBDIR}/libhalo.so.1
            usr/lib/systemd/system/halod.service)
if(EXISTS "${stage}/usr/etc")
  message(FATAL_ERROR "--prefix /usr installed into usr/etc")
endif()
check_unit("${stage}" /usr/lib/systemd/system/halod.service
           /etc/halo/halod.conf)
check_pc("${stage}/usr/${LIBDIR}/pkgconfig/halo.pc" /usr)
file(REMOVE_RECURSE "${stage}")
math(EXPR passes "${passes} + 1")

message(STATUS "${passes} passed, 0 failed")
