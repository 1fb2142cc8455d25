# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
# Part of `cmake --install` (systemd/CMakeLists.txt sets HALO_SOURCE_DIR,
# HALO_BINARY_DIR, HALO_BINDIR, HALO_SYSCONFDIR and HALO_SYSTEMD_UNIT_DIR
# first): installs halod.service, configured for the prefix of this install,
# and the example configuration as SYSCONFDIR/halo/halod.conf unless one is
# there already (an operator's edits are never overwritten).
#
# SYSCONFDIR follows GNUInstallDirs' rules (CMAKE_INSTALL_FULL_SYSCONFDIR)
# for the prefix given at install time: /etc for / and /usr, /etc/opt/X for
# /opt/X, else PREFIX/etc; an absolute CMAKE_INSTALL_SYSCONFDIR as it is.
# file(INSTALL) puts DESTDIR in front of each absolute destination itself
# (and records the file in install_manifest.txt); only the test for an
# existing configuration adds DESTDIR here.

# halo_install_absolute(OUT DIR): DIR under the install prefix.
function(halo_install_absolute out dir)
  if(NOT IS_ABSOLUTE "${dir}")
    set(dir "${CMAKE_INSTALL_PREFIX}/${dir}")
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

string(REGEX REPLACE "(.)/+$" "\\1" halo_prefix "${CMAKE_INSTALL_PREFIX}")
if(IS_ABSOLUTE "${HALO_SYSCONFDIR}")
  set(halo_sysconfdir "${HALO_SYSCONFDIR}")
elseif(halo_prefix STREQUAL "/" OR halo_prefix STREQUAL "/usr")
  set(halo_sysconfdir "/${HALO_SYSCONFDIR}")
elseif(halo_prefix MATCHES "^/opt/")
  set(halo_sysconfdir "/${HALO_SYSCONFDIR}${halo_prefix}")
else()
  set(halo_sysconfdir "${halo_prefix}/${HALO_SYSCONFDIR}")
endif()
halo_install_absolute(halo_bindir "${HALO_BINDIR}")
halo_install_absolute(halo_unit_dir "${HALO_SYSTEMD_UNIT_DIR}")

# The unit: ExecStart names this install's halod and configuration.
set(HALO_FULL_BINDIR "${halo_bindir}")
set(HALO_FULL_SYSCONFDIR "${halo_sysconfdir}")
file(READ "${HALO_SOURCE_DIR}/halod.service.in" halo_unit)
string(CONFIGURE "${halo_unit}" halo_unit @ONLY)
file(WRITE "${HALO_BINARY_DIR}/install/halod.service" "${halo_unit}")
file(INSTALL "${HALO_BINARY_DIR}/install/halod.service"
     DESTINATION "${halo_unit_dir}")

set(halo_config_dir "${halo_sysconfdir}/halo")
if(EXISTS "$ENV{DESTDIR}${halo_config_dir}/halod.conf")
  message(STATUS "Kept: $ENV{DESTDIR}${halo_config_dir}/halod.conf")
else()
  file(INSTALL "${HALO_SOURCE_DIR}/halod.conf"
       DESTINATION "${halo_config_dir}")
endif()
