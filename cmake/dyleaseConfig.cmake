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
#
# dylease_add_plugin(<target> SOURCES <source>... SIGN_KEY <keyfile>) also signs the module
# after each build (`dylease sign <module> --key <keyfile>`: a host built with
# HostBuilder::require_signed loads only signed plugins); it needs the `dylease` command, found
# on PATH or named by the cache variable DYLEASE_COMMAND.

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
  cmake_parse_arguments(PARSE_ARGV 1 DYLEASE "" "SIGN_KEY" "SOURCES")
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
  if(DYLEASE_SIGN_KEY)
    find_program(DYLEASE_COMMAND dylease)
    if(NOT DYLEASE_COMMAND)
      message(FATAL_ERROR "dylease_add_plugin(${target} SIGN_KEY ...): the `dylease` command signs the plugin; \
install it (`cargo install dylease-cli`) or name it with -DDYLEASE_COMMAND=<path>")
    endif()
    # Last, after the link (and any strip): a signature covers the bytes before it.
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND "${DYLEASE_COMMAND}" sign "$<TARGET_FILE:${target}>" --key "${DYLEASE_SIGN_KEY}"
      VERBATIM)
  endif()
endfunction()
