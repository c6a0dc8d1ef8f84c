#include "server/client_socket.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#ifdef _WIN32
#include <winsock2.h>
#else
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

namespace krafla::server {

constexpr const char* kAddressInUse = "the address is already in use (another server?)";

#ifdef _WIN32

ClientSocket client_socket(const std::string&, int, int) { return kNoSocket; }

bool client_alive(ClientSocket) { return true; }

void set_listen_options(ClientSocket listener) {
  BOOL yes = TRUE;
  setsockopt(SOCKET(listener), SOL_SOCKET, SO_EXCLUSIVEADDRUSE, reinterpret_cast<char*>(&yes),
             sizeof(yes));
}

void widen_backlog(ClientSocket listener) { listen(SOCKET(listener), SOMAXCONN); }

void clear_socket_error() { WSASetLastError(0); }

std::string socket_error_text() {
  const int err = WSAGetLastError();
  if (err == 0) return "";
  if (err == WSAEADDRINUSE) return kAddressInUse;
  if (err == WSAEADDRNOTAVAIL) return "not an address of this machine";
  if (err == WSAEACCES) return "permission denied (a port another program holds exclusively?)";
  return fmt::format("Winsock error {}", err);
}

#else

namespace {

// The port of a socket address, with its IP as text in `ip`; -1 for other families.
int port_addr(const sockaddr_storage& a, std::string& ip) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    ip = buf;
    return ntohs(v4->sin_port);
  }
  if (a.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    ip = buf;
    return ntohs(v6->sin6_port);
  }
  return -1;
}

}  // namespace

// The process's sockets are matched by their two addresses (one lookup per request).
ClientSocket client_socket(const std::string& remote_addr, int remote_port, int local_port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return kNoSocket;
  ClientSocket found = kNoSocket;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    sockaddr_storage peer{}, local{};
    socklen_t pl = sizeof(peer), ll = sizeof(local);
    if (fd <= 2 || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0)
      continue;
    std::string pip, lip;
    if (port_addr(peer, pip) == remote_port && pip == remote_addr &&
        port_addr(local, lip) == local_port) {
      found = fd;
      break;
    }
  }
  closedir(d);
  return found;
}

bool client_alive(ClientSocket s) {
  if (s == kNoSocket) return true;
  char c;
  const ssize_t n = recv(int(s), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

void set_listen_options(ClientSocket listener) {
  int yes = 1;
  setsockopt(int(listener), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

void widen_backlog(ClientSocket listener) { listen(int(listener), SOMAXCONN); }

void clear_socket_error() { errno = 0; }

std::string socket_error_text() {
  const int err = errno;
  if (err == 0) return "";
  return err == EADDRINUSE ? kAddressInUse : std::strerror(err);
}

#endif

}  // namespace krafla::server
