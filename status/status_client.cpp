#include "status/status_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "runtime/listen_address.h"

namespace devlet::status {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpAnswer httpGet(const std::string& listen, const std::string& target, const std::string& token,
                   int timeoutMs) {
    HttpAnswer answer;
    const auto parsed = parseListenAddress(listen);
    if (const auto* problem = std::get_if<std::string>(&parsed)) {
        answer.error = "\"" + listen + "\" " + *problem;
        return answer;
    }
    std::string address = std::get<ListenAddress>(parsed).address;
    const unsigned short port = std::get<ListenAddress>(parsed).port;
    if (address == "0.0.0.0") address = "127.0.0.1";
    if (address == "::") address = "::1";
    beast::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(address, ec);
    if (ec) {
        answer.error = "\"" + address + "\" is not an IP address";
        return answer;
    }
    asio::io_context io;
    beast::tcp_stream stream(io);
    beast::flat_buffer buffer;
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, listen);
    request.set(http::field::user_agent, "devlet");
    if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 * 1024 * 1024);
    stream.expires_after(std::chrono::milliseconds(timeoutMs));
    stream.async_connect(tcp::endpoint(ip, port), [&](beast::error_code connected) {
        if (connected) {
            answer.error = connected.message();
            return;
        }
        http::async_write(stream, request, [&](beast::error_code written, std::size_t) {
            if (written) {
                answer.error = written.message();
                return;
            }
            http::async_read(stream, buffer, parser, [&](beast::error_code read, std::size_t) {
                if (read) {
                    answer.error = read.message();
                    return;
                }
                answer.status = static_cast<int>(parser.get().result_int());
                answer.body = std::move(parser.get().body());
            });
        });
    });
    io.run();
    return answer;
}

}  // namespace devlet::status
