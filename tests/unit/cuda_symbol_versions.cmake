# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
# unit.cuda_symbol_versions: the API version of every entry of
# HALO_HAL_CUDA_DRIVER_SYMBOLS (hal/cuda/cuda_symbols.h) is the one whose
# variant cuda.h declares, read from the cudaTypedefs.h of the headers
# built against (PFN_<name>_v<version>: the newest is what cuda.h maps the
# name to), raised to the table's floor of 12000; a fallback names an older
# variant with the same prototype. Fails when new headers move an entry
# point to a new variant, so the table is updated with them.
#   cmake -DSYMBOLS=hal/cuda/cuda_symbols.h -DTYPEDEFS=.../cudaTypedefs.h \
#         -P cuda_symbol_versions.cmake
file(READ "${SYMBOLS}" symbols)
file(READ "${TYPEDEFS}" typedefs)
string(REGEX MATCHALL "X\\(cu[A-Za-z0-9_]+, [0-9]+, [0-9]+\\)" entries
       "${symbols}")
list(LENGTH entries count)
if(count LESS 50)
  message(FATAL_ERROR "found ${count} table entries in ${SYMBOLS}")
endif()

# prototype(OUT NAME VERSION): the parameter list of PFN_NAME_vVERSION.
function(prototype out name version)
  string(REGEX MATCH "PFN_${name}_v${version}\\)\\(([^;]*)\\);" found
         "${typedefs}")
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

set(failures "")
foreach(entry ${entries})
  string(REGEX MATCH "X\\(([A-Za-z0-9_]+), ([0-9]+), ([0-9]+)\\)" _ "${entry}")
  set(name "${CMAKE_MATCH_1}")
  set(version "${CMAKE_MATCH_2}")
  set(fallback "${CMAKE_MATCH_3}")
  string(REGEX MATCHALL "PFN_${name}_v[0-9]+\\)" variants "${typedefs}")
  set(newest 0)
  set(versions "")
  foreach(variant ${variants})
    string(REGEX REPLACE ".*_v([0-9]+)\\)$" "\\1" v "${variant}")
    list(APPEND versions ${v})
    if(v GREATER newest)
      set(newest ${v})
    endif()
  endforeach()
  if(newest EQUAL 0)
    list(APPEND failures "${name}: no PFN_${name}_v* in cudaTypedefs.h")
    continue()
  endif()
  set(expected ${newest})
  if(expected LESS 12000)
    set(expected 12000)
  endif()
  if(NOT version EQUAL expected)
    list(APPEND failures
         "${name}: table says ${version}, cuda.h's variant is ${newest}")
  endif()
  if(NOT fallback EQUAL 0)
    # The variant a driver returns at |fallback|: the newest at or below it.
    set(older 0)
    foreach(v ${versions})
      if(NOT v GREATER fallback AND v GREATER older)
        set(older ${v})
      endif()
    endforeach()
    prototype(newest_prototype ${name} ${newest})
    prototype(older_prototype ${name} ${older})
    if(older EQUAL 0 OR NOT older_prototype STREQUAL newest_prototype)
      list(APPEND failures "${name}: fallback ${fallback} gives another prototype (the variant of ${older}) than ${newest}")
    endif()
  endif()
endforeach()
if(failures)
  string(REPLACE ";" "\n" failures "${failures}")
  message(FATAL_ERROR "hal/cuda/cuda_symbols.h and ${TYPEDEFS} disagree:\n"
                      "${failures}")
endif()
message(STATUS "${count} entries, each at the version of cuda.h's variant")
message(STATUS "1 passed, 0 failed")
