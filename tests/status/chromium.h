#pragma once
// Headless Debian Chromium, driven over the DevTools protocol (a WebSocket, Boost.Beast)
// for tests of the status page: load a URL, evaluate JavaScript in the page, take a
// screenshot. The browser runs in its own process group with an empty profile and no
// background networking; the destructor ends that group.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "status/status_client.h"

namespace devlet::test {

class Chromium {
public:
    // The browser binary: $DEVLET_CHROMIUM, else /usr/bin/chromium; empty if it cannot run.
    static std::string binary() {
        const char* path = std::getenv("DEVLET_CHROMIUM");
        const std::string binary = path && *path ? path : "/usr/bin/chromium";
        return ::access(binary.c_str(), X_OK) == 0 ? binary : "";
    }

    explicit Chromium(const std::filesystem::path& profile) : profile_(profile) {
        std::filesystem::create_directories(profile_);
        std::vector<std::string> args = {binary(),
                                         "--headless",
                                         "--no-sandbox",
                                         "--disable-gpu",
                                         "--no-first-run",
                                         "--disable-background-networking",
                                         "--disable-component-update",
                                         "--disable-sync",
                                         "--disable-dev-shm-usage",
                                         "--window-size=1280,900",
                                         "--remote-debugging-address=127.0.0.1",
                                         "--remote-debugging-port=0",
                                         "--user-data-dir=" + profile_.string(),
                                         "about:blank"};
        const std::string log = (profile_ / "chromium.log").string();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::setpgid(0, 0);
            if (std::FILE* f = std::fopen(log.c_str(), "w")) {
                ::dup2(::fileno(f), 1);
                ::dup2(::fileno(f), 2);
            }
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }

    ~Chromium() {
        ws_.reset();
        if (pid_ <= 0) return;
        ::kill(-pid_, SIGTERM);
        for (int i = 0; i < 100; ++i) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                ::kill(-pid_, SIGKILL);  // helpers that outlived the browser
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }

    std::string log() const {
        std::ifstream in(profile_ / "chromium.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

    // Connects to the browser's first page; false (with why()) if it does not come up.
    bool connect(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        std::string port;
        while (std::chrono::steady_clock::now() < deadline) {
            std::ifstream in(profile_ / "DevToolsActivePort");
            if (in && std::getline(in, port) && !port.empty()) break;
            port.clear();
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (port.empty()) return fail("the browser did not open its DevTools port");
        std::string path;
        while (path.empty() && std::chrono::steady_clock::now() < deadline) {
            const status::HttpAnswer list = status::httpGet("127.0.0.1:" + port, "/json/list", "", 5000);
            boost::system::error_code ec;
            const boost::json::value targets = boost::json::parse(list.body, ec);
            if (!ec && targets.is_array()) {
                for (const auto& t : targets.as_array()) {
                    if (t.at("type").as_string() != "page") continue;
                    const std::string url(t.at("webSocketDebuggerUrl").as_string());
                    path = url.substr(url.find('/', std::string("ws://").size()));
                    break;
                }
            }
            if (path.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (path.empty()) return fail("no page target in /json/list");
        try {
            ws_.emplace(io_);
            boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                    static_cast<unsigned short>(std::stoi(port)));
            ws_->next_layer().connect(endpoint);
            // A browser that stops answering fails the read instead of hanging the test.
            timeval limit{30, 0};
            ::setsockopt(ws_->next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
            ws_->read_message_max(64 * 1024 * 1024);
            ws_->handshake("127.0.0.1:" + port, path);
        } catch (const std::exception& e) {
            return fail(std::string("DevTools WebSocket: ") + e.what());
        }
        return true;
    }

    // Sends one DevTools command and returns its result (null with why() on error).
    boost::json::value call(const std::string& method, boost::json::object params = {}) {
        try {
            const std::int64_t id = ++nextId_;
            ws_->text(true);
            ws_->write(boost::asio::buffer(boost::json::serialize(
                boost::json::object{{"id", id}, {"method", method}, {"params", std::move(params)}})));
            for (;;) {
                boost::beast::flat_buffer buffer;
                ws_->read(buffer);
                boost::json::value message =
                    boost::json::parse(boost::beast::buffers_to_string(buffer.data()));
                const auto* got = message.as_object().if_contains("id");
                if (!got || got->to_number<std::int64_t>() != id) continue;  // an event
                if (const auto* error = message.as_object().if_contains("error")) {
                    why_ = boost::json::serialize(*error);
                    return nullptr;
                }
                return message.at("result");
            }
        } catch (const std::exception& e) {
            why_ = method + ": " + e.what();
            return nullptr;
        }
    }

    bool navigate(const std::string& url) { return !call("Page.navigate", {{"url", url}}).is_null(); }

    // The value of a JavaScript expression evaluated in the page (null if it threw).
    boost::json::value evaluate(const std::string& expression) {
        boost::json::value result =
            call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}});
        if (result.is_null() || result.as_object().contains("exceptionDetails")) return nullptr;
        const auto* value = result.at("result").as_object().if_contains("value");
        return value ? *value : boost::json::value(nullptr);
    }
    std::string text(const std::string& expression) {
        const boost::json::value v = evaluate(expression);
        return v.is_string() ? std::string(v.as_string()) : "";
    }

    // A PNG of the page as it is now; false if it could not be taken or written.
    bool screenshot(const std::filesystem::path& file) {
        const boost::json::value result = call("Page.captureScreenshot", {{"format", "png"}});
        if (result.is_null()) return false;
        const std::string data(result.at("data").as_string());
        std::string png;
        png.resize(boost::beast::detail::base64::decoded_size(data.size()));
        const auto [written, read] =
            boost::beast::detail::base64::decode(png.data(), data.data(), data.size());
        png.resize(written);
        std::filesystem::create_directories(file.parent_path());
        std::ofstream out(file, std::ios::binary);
        out << png;
        return static_cast<bool>(out);
    }

    const std::string& why() const { return why_; }

private:
    bool fail(std::string why) {
        why_ = std::move(why);
        return false;
    }

    std::filesystem::path profile_;
    pid_t pid_ = -1;
    boost::asio::io_context io_;
    std::optional<boost::beast::websocket::stream<boost::asio::ip::tcp::socket>> ws_;
    std::int64_t nextId_ = 0;
    std::string why_;
};

}  // namespace devlet::test
