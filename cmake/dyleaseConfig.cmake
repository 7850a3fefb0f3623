# dyleaseConfig.cmake: the CMake package for building dylease plugins.
#
#     find_package(dylease REQUIRED)
#     dylease_add_plugin(my_passes SOURCES passes.cpp more_passes.cpp)
#
# Found from the source tree (-Ddylease_DIR=<dylease>/cmake) or from a prefix that
# `dylease header --install <prefix>` wrote (-DCMAKE_PREFIX_PATH=<prefix>).
#
# dylease_add_plugin(<target> SOURCES <source>...) adds a shared module that a dylease host can
# load and really unload: position-independent code, hidden visibility (also for inline
# functions), dylease.h on the include path, and the linker version script dylease.map, which
# keeps only the entry point dylease_plugin_v1 global. Without that script g++ exports the
# function-local statics of inline functions and templates as GNU unique symbols, and glibc
# never unloads such a library.

if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../include/dylease.h")
  get_filename_component(DYLEASE_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
else()
  # Installed: <prefix>/lib/cmake/dylease/ beside <prefix>/include/.
  get_filename_component(DYLEASE_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../include" ABSOLUTE)
endif()
set(DYLEASE_VERSION_SCRIPT "${DYLEASE_INCLUDE_DIR}/dylease.map")
if(NOT EXISTS "${DYLEASE_INCLUDE_DIR}/dylease.h" OR NOT EXISTS "${DYLEASE_VERSION_SCRIPT}")
  set(dylease_FOUND FALSE)
  set(dylease_NOT_FOUND_MESSAGE
      "dylease.h or dylease.map is missing from ${DYLEASE_INCLUDE_DIR}; write them with `dylease header --install <prefix>`")
  return()
endif()

function(dylease_add_plugin target)
  cmake_parse_arguments(PARSE_ARGV 1 DYLEASE "" "" "SOURCES")
  if(NOT DYLEASE_SOURCES)
    message(FATAL_ERROR "dylease_add_plugin(${target}): give the plugin's sources with SOURCES")
  endif()
  add_library(${target} MODULE ${DYLEASE_SOURCES})
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    PREFIX "lib")
  target_include_directories(${target} PRIVATE "${DYLEASE_INCLUDE_DIR}")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${DYLEASE_VERSION_SCRIPT}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${DYLEASE_VERSION_SCRIPT}")
endfunction()
