#pragma once
// One HTTPS connection to the API server (Beast over Asio's OpenSSL), opened on first use and
// kept while the server keeps it alive, one exchange at a time. Its handlers hold it (shared)
// until they have run, so that the stream outlives the operations on it. Loop thread only.
// Internal to cluster/: only the client's .cpp files include it.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "cluster/api_client.h"
#include "cluster/api_messages.h"
#include "cluster/kubeconfig.h"

namespace devlet::kube {

class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(boost::asio::io_context& loop, boost::asio::ssl::context& tls, const Kubeconfig& config,
               const ClientOptions& options);

    // Empty on success, or why it could not be opened.
    using Opened = std::function<void(std::string error)>;
    bool isOpen() const { return stream_ && open_; }

    // Connects and shakes hands, each within its timeout or by `deadline` (a call's).
    void open(Opened done, std::optional<Clock::time_point> deadline = std::nullopt);

    // Sends `request` and reads the whole answer.
    void exchange(const std::shared_ptr<Request>& request, std::chrono::milliseconds timeout,
                  std::function<void(boost::beast::error_code, Response)> done);

    // Sends `request` and reads the answer as a stream: `header` once with the status,
    // `body` after each read with what has arrived and not been consumed (it erases what
    // it consumed), `end` once: success when the server ended the answer.
    void stream(const std::shared_ptr<Request>& request, std::chrono::milliseconds idle,
                std::function<void(int, const boost::beast::http::fields&)> header,
                std::function<bool(std::string&)> body, std::function<void(boost::beast::error_code)> end);

    // Whether the last answer lets the connection be used again.
    bool keepAlive() const { return parser_ && parser_->keep_alive(); }

    void close();

private:
    void handshake(const Opened& done, std::optional<Clock::time_point> deadline);
    void readMore(std::chrono::milliseconds idle, const std::function<bool(std::string&)>& body,
                  const std::function<void(boost::beast::error_code)>& end);

    boost::asio::io_context& loop_;
    boost::asio::ssl::context& tls_;
    const Kubeconfig& config_;
    const ClientOptions& options_;
    boost::asio::ip::tcp::resolver resolver_;
    std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> stream_;
    boost::beast::flat_buffer buffer_;
    std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser_;
    bool open_ = false;
};

}  // namespace devlet::kube
