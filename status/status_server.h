#pragma once
// The status server: a read-only HTTP/1.1 server (Boost.Beast) that serves the page, the
// JSON API, a live stream, /metrics, /healthz and /readyz from the immutable snapshots a
// StatusSource hands out. It owns its acceptor, connections and one thread of its own, at
// a lower priority than the daemon's: parsing, rendering and sending never hold the loop,
// which only hands over its current snapshot (the same one while nothing changed). The
// StatusSource is called on the loop thread only. Beast stays behind this header.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;  // NOLINT(readability-identifier-naming): Asio's name, declared to keep Asio out
}

namespace devlet::status {

class StatusSource;

class StatusServer {
public:
    struct Options {
        std::string listen = "127.0.0.1:9797";  // ADDRESS:PORT or [ADDRESS]:PORT
        // Read when the address is not a loopback one: every request but /healthz and
        // /readyz needs "Authorization: Bearer <its content>". It must exist, hold a token
        // and not be readable by group or others, else start() refuses the address.
        std::string tokenFile;
        std::size_t maxConnections = 64;
        // Live streams (/api/v1/status/stream) open at once; more clients are told to poll.
        std::size_t maxStreams = 8;
        // A request must arrive whole within this time of the connection opening or of
        // the previous response (slow clients cannot hold the daemon); also the write limit.
        std::chrono::milliseconds requestTimeout{15000};
    };

    // `loop` is the daemon's: the source is called there.
    StatusServer(boost::asio::io_context& loop, StatusSource& source, Options options);
    ~StatusServer();
    StatusServer(const StatusServer&) = delete;
    StatusServer& operator=(const StatusServer&) = delete;

    // Binds and starts accepting; returns why it cannot (empty on success): an address that
    // is not loopback without a usable token file is refused, with how to fix it.
    std::string start();
    // Closes the listener and every connection and ends the server's thread; the source is
    // not called afterwards. On the loop thread.
    void stop();
    // The address and port actually bound ("127.0.0.1:9797"); empty before start().
    std::string endpoint() const;
    // Whether requests need the bearer token.
    bool requiresToken() const;

private:
    class Impl;
    std::unique_ptr<Impl> impl_;  // with the loop thread's check for start() and stop()
};

// Where the bearer token is looked for: $CREDENTIALS_DIRECTORY/status-token when systemd
// passes credentials (LoadCredential=), else /etc/devlet/status-token.
std::string defaultTokenFile();

}  // namespace devlet::status
