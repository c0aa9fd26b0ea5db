#pragma once
// Helpers for tests that talk to a running devlet's status server: a free loopback port,
// GET over the same client `devlet status` uses, and raw TCP connections for requests no
// well-behaved client sends.

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "status/status_client.h"

namespace devlet::test {

// A port nobody listens on now (the kernel's choice for an ephemeral bind).
inline unsigned short freePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot bind a loopback socket to find a free port");
    }
    socklen_t length = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    ::close(fd);
    return ntohs(address.sin_port);
}

// The port of a daemon started with --listen 127.0.0.1:0, from the line its log has once
// the status server listens; 0 before that.
inline unsigned short statusPortFromLog(const std::string& log) {
    const std::string marker = "status page at http://127.0.0.1:";
    const auto at = log.find(marker);
    if (at == std::string::npos) return 0;
    unsigned port = 0;
    for (std::size_t i = at + marker.size(); i < log.size() && log[i] >= '0' && log[i] <= '9'; ++i)
        port = port * 10 + static_cast<unsigned>(log[i] - '0');
    return port > 65535 ? 0 : static_cast<unsigned short>(port);
}

inline status::HttpAnswer httpGet(unsigned short port, const std::string& target,
                                  const std::string& token = "") {
    return status::httpGet("127.0.0.1:" + std::to_string(port), target, token, 10000);
}

// Polls `predicate` until it holds or the deadline passes (no timing is asserted).
template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (predicate()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return predicate();
}

// One TCP connection to the status server, driven byte by byte.
class RawConnection {
public:
    explicit RawConnection(unsigned short port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(port);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    }
    ~RawConnection() { ::close(fd_); }
    RawConnection(const RawConnection&) = delete;
    RawConnection& operator=(const RawConnection&) = delete;

    bool connected() const { return connected_; }
    bool send(const std::string& bytes) {
        return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
    }
    // Reads until the peer closes or nothing arrives for `quiet`; returns what came.
    std::string readUntilClosed(std::chrono::milliseconds quiet) {
        std::string received;
        for (;;) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(quiet.count())) <= 0) {
                closed_ = false;
                return received;
            }
            char buffer[4096];
            const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
            if (n <= 0) {
                closed_ = true;
                return received;
            }
            received.append(buffer, static_cast<std::size_t>(n));
        }
    }
    bool closedByPeer() const { return closed_; }
    // Reads until what came so far (kept between calls) contains `needle` after `from`, or
    // nothing more arrives within `quiet`; returns where the needle starts (npos if not).
    std::size_t readUntil(const std::string& needle, std::size_t from, std::chrono::milliseconds quiet) {
        for (;;) {
            if (auto at = kept_.find(needle, from); at != std::string::npos) return at;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(quiet.count())) <= 0) return std::string::npos;
            char buffer[65536];
            const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
            if (n <= 0) {
                closed_ = true;
                return kept_.find(needle, from);
            }
            kept_.append(buffer, static_cast<std::size_t>(n));
        }
    }
    const std::string& received() const { return kept_; }

private:
    int fd_ = -1;
    bool connected_ = false;
    bool closed_ = false;
    std::string kept_;  // what readUntil() received
};

}  // namespace devlet::test
