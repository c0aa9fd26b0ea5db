#include "cluster/api_connection.h"

#include <cerrno>
#include <cstring>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "runtime/log.h"

namespace devlet::kube {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr Log log{"kube"};
constexpr std::uint64_t kBodyLimit = 64 * 1024 * 1024;

// A dead peer (a node that lost power, a NAT that forgot the flow) sends no RST: without
// these a connection, a watch above all, would wait for the kernel's two hours of idle and
// fifteen retransmissions. 15 s idle + 3 probes 5 s apart, and at most 30 s for unacknowledged
// data, notice it in about 30 s, as client-go's HTTP/2 health check does.
void setKeepAlive(tcp::socket& socket) {
    struct Option {
        int level, name, value;
        const char* what;
    };
    static constexpr Option kOptions[] = {
        {SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"},
        {IPPROTO_TCP, TCP_KEEPIDLE, 15, "TCP_KEEPIDLE"},
        {IPPROTO_TCP, TCP_KEEPINTVL, 5, "TCP_KEEPINTVL"},
        {IPPROTO_TCP, TCP_KEEPCNT, 3, "TCP_KEEPCNT"},
        {IPPROTO_TCP, TCP_USER_TIMEOUT, 30000, "TCP_USER_TIMEOUT"},
    };
    for (const Option& option : kOptions) {
        if (::setsockopt(socket.native_handle(), option.level, option.name, &option.value,
                         sizeof option.value) != 0)
            log.debug() << "cannot set " << option.what
                        << " on the connection to the API server: " << std::strerror(errno);
    }
}

}  // namespace

Connection::Connection(net::io_context& loop, ssl::context& tls, const Kubeconfig& config,
                       const ClientOptions& options)
    : loop_(loop), tls_(tls), config_(config), options_(options), resolver_(loop) {}

void Connection::open(Opened done, std::optional<Clock::time_point> deadline) {
    close();
    stream_.emplace(loop_, tls_);
    // SNI for a host name; the certificate is checked against the name or the address.
    boost::system::error_code parseError;
    net::ip::make_address(config_.host, parseError);
    if (parseError) SSL_set_tlsext_host_name(stream_->native_handle(), config_.host.c_str());
    stream_->set_verify_callback(ssl::host_name_verification(config_.host));
    beast::get_lowest_layer(*stream_).expires_after(within(options_.connectTimeout, deadline));
    resolver_.async_resolve(
        config_.host, config_.port,
        [self = shared_from_this(), done = std::move(done), deadline](
            const beast::error_code& ec, const tcp::resolver::results_type& results) {
            if (ec) return done(transportMessage("resolving the API server", ec));
            if (!self->stream_) return done("closed");
            beast::get_lowest_layer(*self->stream_)
                .async_connect(results,
                               [self, done, deadline](const beast::error_code& ec, const tcp::endpoint&) {
                                   if (ec) return done(transportMessage("connecting to the API server", ec));
                                   setKeepAlive(beast::get_lowest_layer(*self->stream_).socket());
                                   self->handshake(done, deadline);
                               });
        });
}

void Connection::exchange(const std::shared_ptr<Request>& request, std::chrono::milliseconds timeout,
                          std::function<void(beast::error_code, Response)> done) {
    beast::get_lowest_layer(*stream_).expires_after(timeout);
    http::async_write(*stream_, *request,
                      [self = shared_from_this(), request, done = std::move(done)](
                          const beast::error_code& ec, std::size_t) {
                          if (ec) return done(ec, {});
                          self->parser_.emplace();
                          self->parser_->body_limit(kBodyLimit);
                          http::async_read(*self->stream_, self->buffer_, *self->parser_,
                                           [self, done](const beast::error_code& ec, std::size_t) {
                                               if (ec) return done(ec, {});
                                               done(ec, self->parser_->release());
                                           });
                      });
}

void Connection::stream(const std::shared_ptr<Request>& request, std::chrono::milliseconds idle,
                        std::function<void(int, const http::fields&)> header,
                        std::function<bool(std::string&)> body, std::function<void(beast::error_code)> end) {
    beast::get_lowest_layer(*stream_).expires_after(options_.requestTimeout);
    http::async_write(
        *stream_, *request,
        [self = shared_from_this(), request, idle, header = std::move(header), body = std::move(body),
         end = std::move(end)](const beast::error_code& ec, std::size_t) {
            if (ec) return end(ec);
            self->parser_.emplace();
            self->parser_->body_limit(boost::none);
            http::async_read_header(
                *self->stream_, self->buffer_, *self->parser_,
                [self, idle, header, body, end](const beast::error_code& ec, std::size_t) {
                    if (ec) return end(ec);
                    header(static_cast<int>(self->parser_->get().result_int()), self->parser_->get());
                    self->readMore(idle, body, end);
                });
        });
}

void Connection::close() {
    open_ = false;
    resolver_.cancel();
    if (stream_) {
        beast::error_code ignored;
        beast::get_lowest_layer(*stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
        beast::get_lowest_layer(*stream_).close();
    }
    // The stream stays until its handlers have run: they hold this object.
    buffer_.clear();
}

void Connection::handshake(const Opened& done, std::optional<Clock::time_point> deadline) {
    beast::get_lowest_layer(*stream_).expires_after(within(options_.handshakeTimeout, deadline));
    stream_->async_handshake(
        ssl::stream_base::client, [self = shared_from_this(), done](const beast::error_code& ec) {
            if (ec) {
                std::string message = transportMessage("TLS handshake with the API server", ec);
                if (ec.category() == net::error::get_ssl_category()) {
                    const long verify = SSL_get_verify_result(self->stream_->native_handle());
                    if (verify != X509_V_OK)
                        message += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
                }
                return done(message);
            }
            self->open_ = true;
            beast::get_lowest_layer(*self->stream_).expires_never();
            done("");
        });
}

void Connection::readMore(std::chrono::milliseconds idle, const std::function<bool(std::string&)>& body,
                          const std::function<void(beast::error_code)>& end) {
    if (parser_->is_done()) return end({});
    beast::get_lowest_layer(*stream_).expires_after(idle);
    http::async_read_some(
        *stream_, buffer_, *parser_,
        [self = shared_from_this(), idle, body, end](const beast::error_code& ec, std::size_t) {
            if (ec) return end(ec);
            if (!body(self->parser_->get().body())) return;  // consumer stopped
            self->readMore(idle, body, end);
        });
}

}  // namespace devlet::kube
