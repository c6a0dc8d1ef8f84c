# Shared by the Debian cross toolchain files: KRAFLA_CROSS_TRIPLE names the compiler prefix and
# the target's multiarch root (/usr/<triple>: its libc and libstdc++); KRAFLA_CROSS_COMPILER_SUFFIX,
# if set, picks a variant of the compiler (MinGW's -posix).
set(CMAKE_C_COMPILER ${KRAFLA_CROSS_TRIPLE}-gcc${KRAFLA_CROSS_COMPILER_SUFFIX})
set(CMAKE_CXX_COMPILER ${KRAFLA_CROSS_TRIPLE}-g++${KRAFLA_CROSS_COMPILER_SUFFIX})
set(CMAKE_FIND_ROOT_PATH /usr/${KRAFLA_CROSS_TRIPLE})
# Programs (python3, qemu, node) are the build host's; libraries, headers and CMake packages
# only the target's, so nothing of the host's x86-64 is linked by mistake. The header-only
# dependencies are taken from the host on purpose (cmake/toolchains/host_headers.cmake).
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Every executable static, the tests included: qemu-user then needs no target root (-L) and
# the binaries run as they are on a device.
set(CMAKE_EXE_LINKER_FLAGS_INIT -static)
