# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
# integration.package_test: an installed halo is usable by programs built
# outside its tree.
#   1. libhalo.so.1 has the SONAME libhalo.so.1 and exports exactly the
#      functions the public headers declare, under the version node HALO_1.
#   2. find_package(halo CONFIG) in a separate CMake project
#      (package_consumer/) gives halo::halo; examples/hello.c builds
#      against it and runs on the installed libhalo.so.1 (it reports that
#      no halod listens at an address where none does).
#   3. libhalo.a is self-contained: hello.c links against it with only the
#      libraries `pkg-config --static --libs halo` adds, and the program
#      needs no libhalo.so.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DPREFIX=... -DCC=... \
#         -DLIBDIR=... -DINCLUDEDIR=... -P package_test.cmake
#   (LIBDIR, INCLUDEDIR: the configured CMAKE_INSTALL_* directories;
#   -DSANITIZE=FLAGS: the sanitizer flags of the tree, for the programs)
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}"
                        --prefix "${PREFIX}"
                RESULT_VARIABLE result OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${result}):\n${output}")
endif()
set(libdir "${PREFIX}/${LIBDIR}")

# run(OUT_VAR COMMAND...): the command's stdout; fails the test on an error.
function(run out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result
                  OUTPUT_VARIABLE output ERROR_VARIABLE error)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${result}):\n${output}${error}")
  endif()
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

# ---- 1. SONAME and exported symbols
run(dynamic readelf -d "${libdir}/libhalo.so.1")
if(NOT dynamic MATCHES "\\(SONAME\\)[^\n]*\\[libhalo\\.so\\.1\\]")
  message(FATAL_ERROR "libhalo.so.1 has no SONAME libhalo.so.1:\n${dynamic}")
endif()
run(symbols nm -D --defined-only "${libdir}/libhalo.so.1")
string(REGEX MATCHALL "[^\n]+" symbols "${symbols}")
set(exported "")
foreach(line ${symbols})
  if(line MATCHES " A HALO_1$")  # the version node itself
    continue()
  elseif(line MATCHES " [A-Z] ([^@ ]+)@@?(.*)$")
    set(name "${CMAKE_MATCH_1}")
    set(node "${CMAKE_MATCH_2}")
    if(NOT node STREQUAL "HALO_1")
      message(FATAL_ERROR "libhalo.so.1 exports ${name} under '${node}' "
                          "(expected version node HALO_1)")
    endif()
    list(APPEND exported "${name}")
  else()
    message(FATAL_ERROR "libhalo.so.1 exports an unversioned symbol: ${line}")
  endif()
endforeach()
file(GLOB headers "${PREFIX}/${INCLUDEDIR}/halo/*.h")
set(declared "")
foreach(header ${headers})
  file(READ "${header}" text)
  string(REGEX MATCHALL "HALO_API[^(;]*[ *\n](halo_[a-z0-9_]+)\\(" found
         "${text}")
  foreach(declaration ${found})
    string(REGEX REPLACE ".*[ *\n](halo_[a-z0-9_]+)\\($" "\\1" name
           "${declaration}")
    list(APPEND declared "${name}")
  endforeach()
endforeach()
list(SORT exported)
list(SORT declared)
list(REMOVE_DUPLICATES declared)
list(LENGTH exported exported_count)
if(NOT exported STREQUAL declared)
  set(extra ${exported})
  list(REMOVE_ITEM extra ${declared})
  set(absent ${declared})
  list(REMOVE_ITEM absent ${exported})
  message(FATAL_ERROR "libhalo.so.1's exports differ from the HALO_API "
                      "declarations of include/halo/:\nexported, not "
                      "declared: ${extra}\ndeclared, not exported: ${absent}")
endif()
message(STATUS "libhalo.so.1: SONAME libhalo.so.1, ${exported_count} "
               "symbols at HALO_1, each declared HALO_API")

# ---- 2. find_package(halo CONFIG) and halo::halo
set(consumer "${PREFIX}-consumer")
file(REMOVE_RECURSE "${consumer}")
run(output ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/integration/package_consumer"
    -B "${consumer}" -DCMAKE_C_COMPILER=${CC} -DCMAKE_PREFIX_PATH=${PREFIX}
    -DHALO_EXAMPLE_SOURCE=${SOURCE_DIR}/examples/hello.c
    "-DCMAKE_C_FLAGS=${SANITIZE}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE}")
run(output ${CMAKE_COMMAND} --build "${consumer}")
run(dynamic readelf -d "${consumer}/hello")
if(NOT dynamic MATCHES "\\(NEEDED\\)[^\n]*\\[libhalo\\.so\\.1\\]")
  message(FATAL_ERROR "hello does not need libhalo.so.1:\n${dynamic}")
endif()
# Loaded from the install tree (CMake's build RPATH names it), not build/.
run(loaded ${CMAKE_COMMAND} -E env LD_TRACE_LOADED_OBJECTS=1
    "${consumer}/hello")
if(NOT loaded MATCHES "libhalo\\.so\\.1 => ${libdir}/libhalo\\.so\\.1")
  message(FATAL_ERROR "hello does not load ${libdir}/libhalo.so.1:\n"
                      "${loaded}")
endif()
set(address "ipc://${consumer}/no-halod.sock")
execute_process(COMMAND ${CMAKE_COMMAND} -E env HALO_ADDRESS=${address}
                        "${consumer}/hello"
                RESULT_VARIABLE result OUTPUT_VARIABLE output
                ERROR_VARIABLE output TIMEOUT 20)
if(result EQUAL 0 OR NOT output MATCHES "no-halod\\.sock")
  message(FATAL_ERROR "hello against ${address} (no halod): expected a "
                      "failure naming the address, got ${result}:\n${output}")
endif()
message(STATUS "find_package(halo CONFIG): hello built, runs on "
               "${libdir}/libhalo.so.1")

# ---- 3. the static library
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
run(flags ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${libdir}/pkgconfig
    ${PKG_CONFIG} --define-variable=prefix=${PREFIX} --static --cflags
    --libs halo)
string(STRIP "${flags}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
list(REMOVE_ITEM flags -lhalo)  # the archive by its path instead
run(output ${CC} ${SANITIZE} -o "${consumer}/hello-static" "${SOURCE_DIR}/examples/hello.c"
    "${libdir}/libhalo.a" ${flags})
run(dynamic readelf -d "${consumer}/hello-static")
if(dynamic MATCHES "libhalo")
  message(FATAL_ERROR "hello-static needs libhalo.so:\n${dynamic}")
endif()
run(symbols nm "${consumer}/hello-static")
if(NOT symbols MATCHES " T halo_client_connect\n")
  message(FATAL_ERROR "hello-static has no halo_client_connect")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env HALO_ADDRESS=${address}
                        "${consumer}/hello-static"
                RESULT_VARIABLE result OUTPUT_VARIABLE output
                ERROR_VARIABLE output TIMEOUT 20)
if(result EQUAL 0 OR NOT output MATCHES "no-halod\\.sock")
  message(FATAL_ERROR "hello-static against ${address} (no halod): "
                      "expected a failure naming the address, got "
                      "${result}:\n${output}")
endif()
message(STATUS "libhalo.a: hello-static linked with pkg-config --static "
               "(${flags}) and runs")

file(REMOVE_RECURSE "${PREFIX}" "${consumer}")
message(STATUS "3 passed, 0 failed")
