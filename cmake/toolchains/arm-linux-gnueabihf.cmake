# Cross build for 32-bit Arm Linux, hard float (ARMv7-A), with Debian's cross compiler
# (g++-arm-linux-gnueabihf); the tests run under qemu-arm.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(KRAFLA_CROSS_TRIPLE arm-linux-gnueabihf)
include(${CMAKE_CURRENT_LIST_DIR}/cross_common.cmake)
