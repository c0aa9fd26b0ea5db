#pragma once
// What the API client's tests share: an event loop run until a condition holds (with a
// generous deadline, never a timed assertion), one call run to its answer, and retries
// fast enough for a test. Test thread only.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "cluster/api_client.h"

namespace devlet::kube {

class ApiClientLoop {
public:
    static ClientOptions fastRetries() {
        ClientOptions options;
        options.backoffInitial = std::chrono::milliseconds(10);
        options.backoffMax = std::chrono::milliseconds(50);
        return options;
    }

    // Runs the loop until `done` holds; false after a generous deadline.
    bool runUntil(const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            loop.restart();
            loop.run_for(std::chrono::milliseconds(20));
        }
        return true;
    }

    // Starts one call and runs the loop until it is answered.
    ApiResult call(const std::function<void(ResultHandler)>& start) {
        std::optional<ApiResult> result;
        start([&](ApiResult r) { result = std::move(r); });
        if (!runUntil([&] { return result.has_value(); }))
            return ApiResult{0, "", "no answer in 30 s", {}, 0};
        return result.value_or(ApiResult{});
    }

    boost::asio::io_context loop;
};

// The Leases both test programs write: devlet's namespace, a holder and nothing else.
inline const std::string kLeases = "/apis/coordination.k8s.io/v1/namespaces/devlet/leases";

inline boost::json::object lease(const std::string& name, const std::string& holder) {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", name}}},
            {"spec", {{"holderIdentity", holder}, {"leaseDurationSeconds", 15}}}};
}

inline std::string holderOf(const boost::json::object& object) {
    return std::string(object.at("spec").at("holderIdentity").as_string());
}

}  // namespace devlet::kube
