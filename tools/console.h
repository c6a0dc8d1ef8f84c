// The platform file for the standard streams. POSIX needs nothing. On Windows the C runtime's
// text mode would write "\r\n" for "\n" and drop "\r" from input, and the console would show
// UTF-8 in its OEM code page: the executables write and read the same bytes as on Linux, stderr
// is unbuffered, and the console's code pages are UTF-8 while they run.
#pragma once

namespace krafla::cli {

// Called once, first thing in run_main.
void init_console();

}  // namespace krafla::cli
