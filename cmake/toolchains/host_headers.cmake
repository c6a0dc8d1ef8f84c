# Cross builds: the header-only dependencies (fmt in header-only mode, CLI11, nlohmann/json)
# are the build host's Debian headers; their CMake packages describe host libraries and are
# not searched. Only those three header trees are exposed (a staging folder of links), never
# /usr/include itself, whose libc headers would shadow the target's.
set(_stage ${CMAKE_BINARY_DIR}/host-headers)
file(MAKE_DIRECTORY ${_stage})
foreach(dir fmt CLI nlohmann)
  if(NOT EXISTS /usr/include/${dir})
    message(FATAL_ERROR "cross build: /usr/include/${dir} is missing (scripts/setup.sh installs "
                        "libfmt-dev, libcli11-dev and nlohmann-json3-dev)")
  endif()
  file(CREATE_LINK /usr/include/${dir} ${_stage}/${dir} SYMBOLIC)
endforeach()

function(_krafla_host_header_target name)
  add_library(${name} INTERFACE IMPORTED)
  set_target_properties(${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${_stage} ${ARGN})
endfunction()
_krafla_host_header_target(fmt::fmt-header-only INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
_krafla_host_header_target(CLI11::CLI11)
_krafla_host_header_target(nlohmann_json::nlohmann_json)
