#include "console.h"

#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#include <windows.h>

#include <cstdio>
#include <cstdlib>
#endif

namespace krafla::cli {

#ifdef _WIN32
namespace {

// The code pages the console had, put back at exit: they belong to the console window, which
// the shell that started us keeps using. (An exit by Ctrl-C, std::_Exit, skips this.)
UINT g_input_cp = 0, g_output_cp = 0;

void restore_code_pages() {
  if (g_output_cp) SetConsoleOutputCP(g_output_cp);
  if (g_input_cp) SetConsoleCP(g_input_cp);
}

}  // namespace

void init_console() {
  _setmode(_fileno(stdin), _O_BINARY);
  _setmode(_fileno(stdout), _O_BINARY);
  _setmode(_fileno(stderr), _O_BINARY);
  // Redirected to a file or pipe, msvcrt buffers stderr: ml_server's log would show only at
  // exit. Unbuffered, as the C standard has it.
  std::setvbuf(stderr, nullptr, _IONBF, 0);
  g_output_cp = GetConsoleOutputCP();  // 0 when there is no console (a service, a pipe only)
  g_input_cp = GetConsoleCP();
  if (!g_output_cp && !g_input_cp) return;
  SetConsoleOutputCP(CP_UTF8);
  SetConsoleCP(CP_UTF8);
  std::atexit(restore_code_pages);
}

#else

void init_console() {}

#endif

}  // namespace krafla::cli
