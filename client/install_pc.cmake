# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
# Part of `cmake --install` (client/CMakeLists.txt sets HALO_PC_BUILT, the
# halo.pc configured in the build tree, and HALO_PC_LIBDIR, where it goes
# under the prefix): installs halo.pc with the prefix of this install, so
# that `cmake --install build --prefix DIR` gives a halo.pc naming DIR, as
# the unit names it (systemd/install.cmake). Its libdir and includedir are
# relative to ${prefix} where the build's are.
file(READ "${HALO_PC_BUILT}" halo_pc)
string(REGEX REPLACE "(^|\n)prefix=[^\n]*" "\\1prefix=${CMAKE_INSTALL_PREFIX}"
       halo_pc "${halo_pc}")
get_filename_component(halo_pc_dir "${HALO_PC_BUILT}" DIRECTORY)
file(WRITE "${halo_pc_dir}/install/halo.pc" "${halo_pc}")
set(halo_pc_destination "${HALO_PC_LIBDIR}/pkgconfig")
if(NOT IS_ABSOLUTE "${halo_pc_destination}")
  set(halo_pc_destination "${CMAKE_INSTALL_PREFIX}/${halo_pc_destination}")
endif()
file(INSTALL "${halo_pc_dir}/install/halo.pc"
     DESTINATION "${halo_pc_destination}")
