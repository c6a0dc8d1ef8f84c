# Cross build for 64-bit Windows with Debian's MinGW-w64 (g++-mingw-w64-x86-64); the presets run
# the results under Wine (wine64). The posix-threads variant of the compiler is the one whose
# libstdc++ has std::thread, std::mutex and std::condition_variable (the win32 variant lacks
# them in GCC 12); `-static` (cross_common.cmake) links libstdc++, libgcc and winpthread into
# each .exe, so it needs no MinGW DLL beside it.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(KRAFLA_CROSS_TRIPLE x86_64-w64-mingw32)
set(KRAFLA_CROSS_COMPILER_SUFFIX -posix)
include(${CMAKE_CURRENT_LIST_DIR}/cross_common.cmake)
set(CMAKE_RC_COMPILER ${KRAFLA_CROSS_TRIPLE}-windres)
