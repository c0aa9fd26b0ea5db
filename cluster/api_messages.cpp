#include "cluster/api_messages.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <boost/json.hpp>

namespace devlet::kube {

namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

// Half the delay fixed, half random: spreads nodes that failed together.
std::chrono::milliseconds jittered(std::chrono::milliseconds delay) {
    std::uniform_int_distribution<long long> half(0, delay.count() / 2);
    return std::chrono::milliseconds(delay.count() - delay.count() / 2 + half(randomSource()));
}

}  // namespace

std::mt19937& randomSource() {
    static std::mt19937 generator{std::random_device{}()};
    return generator;
}

std::chrono::milliseconds backoffDelay(const ClientOptions& options, int failures) {
    auto delay = options.backoffInitial;
    for (int i = 1; i < failures && delay < options.backoffMax; ++i) delay *= 2;
    return jittered(std::min(delay, options.backoffMax));
}

std::chrono::milliseconds within(std::chrono::milliseconds limit, std::optional<Clock::time_point> deadline) {
    if (!deadline) return limit;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
    return std::clamp(left, std::chrono::milliseconds(1), limit);
}

std::string transportMessage(const std::string& phase, const boost::beast::error_code& ec) {
    if (ec == boost::beast::error::timeout) return phase + " timed out";
    return phase + ": " + ec.message();
}

// A Status's reason and message, or the start of a body that is not one.
void readStatus(ApiResult& result, const std::string& text) {
    json::error_code ec;
    result.body = json::parse(text, ec);
    if (ec) {
        result.body = nullptr;
        if (!result.ok()) result.message = text.substr(0, 300);
        return;
    }
    if (const json::object* object = result.body.if_object()) {
        const json::value* kind = object->if_contains("kind");
        if (kind && kind->is_string() && kind->get_string() == "Status") {
            if (const json::value* reason = object->if_contains("reason"); reason && reason->is_string())
                result.reason = std::string(reason->get_string());
            if (const json::value* message = object->if_contains("message"); message && message->is_string())
                result.message = std::string(message->get_string());
        }
    }
}

ApiResult transportFailure(std::string message, int attempts) {
    ApiResult result;
    result.message = std::move(message);
    result.attempts = attempts;
    return result;
}

// Every Retry-After, of any answer, calls and watches, is cut to `most`: a server (or a proxy
// in front of it) that asks for a day must not park the node for a day.
std::optional<std::chrono::milliseconds> retryAfter(const http::fields& headers,
                                                    std::chrono::milliseconds most) {
    auto it = headers.find(http::field::retry_after);
    if (it == headers.end()) return std::nullopt;
    const std::string value(it->value());
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;  // the HTTP-date form is not sent by the API server
    const long long seconds = value.size() > 9 ? 999'999'999LL : std::stoll(value);
    return std::min<std::chrono::milliseconds>(std::chrono::seconds(seconds), most);
}

// The API server answers a watch (or a list) from a resourceVersion newer than its cache
// with 504 and this cause; watching again from that version would get the same answer
// forever, so only a list (without a version) gets the informer going again.
bool resourceVersionTooLarge(const ApiResult& result) {
    if (result.code != 504) return false;
    if (result.message.find("Too large resource version") != std::string::npos) return true;
    const json::object* status = result.body.if_object();
    const json::value* details = status ? status->if_contains("details") : nullptr;
    const json::value* causes =
        details && details->is_object() ? details->get_object().if_contains("causes") : nullptr;
    if (!causes || !causes->is_array()) return false;
    for (const json::value& cause : causes->get_array()) {
        const json::value* reason = cause.is_object() ? cause.get_object().if_contains("reason") : nullptr;
        if (reason && reason->is_string() && reason->get_string() == "ResourceVersionTooLarge") return true;
    }
    return false;
}

std::string ApiResult::describe() const {
    if (code == 0) return message;
    std::string text = std::to_string(code);
    if (!reason.empty()) text += " " + reason;
    if (!message.empty()) text += ": " + message;
    return text;
}

std::string collectionPath(const std::string& groupVersion, const std::string& namespaceName,
                           const std::string& resource) {
    std::string path = groupVersion == "v1" ? "/api/v1" : "/apis/" + groupVersion;
    if (!namespaceName.empty()) path += "/namespaces/" + namespaceName;
    return path + "/" + resource;
}

std::string queryEscape(const std::string& value) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : value) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
        }
    }
    return out;
}

std::string stringAt(const json::value& value, std::string_view pointer) {
    json::error_code ec;
    const json::value* found = value.find_pointer(pointer, ec);
    return found && found->is_string() ? std::string(found->get_string()) : "";
}

}  // namespace devlet::kube
