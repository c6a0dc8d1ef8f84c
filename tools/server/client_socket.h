// The platform file for the socket calls ml_server makes itself, beside cpp-httplib's: finding
// the connection a request came on (to stop generating for a client that left), the listening
// socket's options and why a bind failed. POSIX: /proc/self/fd and a peek; Windows (Winsock)
// has no way to find a request's socket, so there a client that left is noticed only when a
// write to it fails: at once while streaming, at the end of a non-streamed reply.
#pragma once
#include <cstdint>
#include <string>

namespace krafla::server {

using ClientSocket = std::intptr_t;  // a file descriptor, or a Winsock SOCKET
constexpr ClientSocket kNoSocket = -1;

// The socket of the connection from remote_addr:remote_port to this process's local_port, or
// kNoSocket (not found, or on Windows): httplib 0.11 hands handlers no socket.
ClientSocket client_socket(const std::string& remote_addr, int remote_port, int local_port);

// Whether the client is still there: a closed connection reads as end-of-file. Bytes waiting
// (a pipelined request) count as there, and so does kNoSocket.
bool client_alive(ClientSocket s);

// For httplib's set_socket_options on the listening socket: one listener per port. httplib's
// POSIX default sets SO_REUSEPORT, which lets a second server bind the same port and the
// kernel then splits connections between the two: requests meant for a server with --api-key
// could reach one without. SO_REUSEADDR alone still allows an immediate restart (while old
// connections sit in TIME_WAIT) but not two listeners. On Windows SO_REUSEADDR would allow the
// second listener, so there it is SO_EXCLUSIVEADDRUSE.
void set_listen_options(ClientSocket listener);

// After the bind: lets SOMAXCONN connections wait to be accepted. httplib listens with a backlog
// of 5, so a burst of new connections overflowed the queue and the kernel dropped their SYNs:
// each such client (a /health probe among them) waited for the retransmission, a whole second.
// Listening again changes the backlog on Linux; on Windows it is a harmless no-op.
void widen_backlog(ClientSocket listener);

// Forgets, then describes, the last socket error of this thread (errno; WSAGetLastError on
// Windows): "" when there is none.
void clear_socket_error();
std::string socket_error_text();

}  // namespace krafla::server
