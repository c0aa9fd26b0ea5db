#pragma once
// What the API client and its informers share about one exchange with the API server: the
// HTTP messages, how an answer becomes an ApiResult, and how long to wait before trying again.
// Internal to cluster/: only the client's .cpp files include it (it shows Beast's types).

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include "cluster/api_client.h"

namespace devlet::kube {

using Clock = std::chrono::steady_clock;
using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

std::mt19937& randomSource();

// The delay before the next try after `failures` failures in a row: doubled from
// backoffInitial up to backoffMax, with jitter.
std::chrono::milliseconds backoffDelay(const ClientOptions& options, int failures);

// `limit`, or less when `deadline` comes sooner (at least 1 ms: 0 would mean "never").
std::chrono::milliseconds within(std::chrono::milliseconds limit, std::optional<Clock::time_point> deadline);

// "connecting to the API server timed out", "…: connection refused".
std::string transportMessage(const std::string& phase, const boost::beast::error_code& ec);

// Fills `result`'s body from the answer's text, and its reason and message from a Status;
// the start of a failed answer that is not JSON becomes the message.
void readStatus(ApiResult& result, const std::string& text);

// A call that got no HTTP answer.
ApiResult transportFailure(std::string message, int attempts = 1);

// The answer's Retry-After in seconds, cut to `most`; nullopt without one.
std::optional<std::chrono::milliseconds> retryAfter(const boost::beast::http::fields& headers,
                                                    std::chrono::milliseconds most);

// A 504 "Too large resource version": the server has not reached the version asked for.
bool resourceVersionTooLarge(const ApiResult& result);

}  // namespace devlet::kube
