# Cross build for 64-bit Arm Linux with Debian's cross compiler (g++-aarch64-linux-gnu); the
# tests run under qemu-user (the presets set CMAKE_CROSSCOMPILING_EMULATOR with a -cpu model).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(KRAFLA_CROSS_TRIPLE aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/cross_common.cmake)
