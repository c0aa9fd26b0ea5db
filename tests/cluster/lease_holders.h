#pragma once
// Who holds each of devlet's Leases, as the API double has them: what the cluster tests
// compare after each step. Reads with the given token (the fixture's first by default).

#include <map>
#include <string>

#include <boost/json.hpp>

#include "tests/cluster/kube_double_fixture.h"

namespace devlet::test {

// Slot Lease name -> spec.holderIdentity ("" when released), in namespace `ns`; the nodes'
// own Leases (label devlet.io/node-lease) are left out: nodeLeaseHolders() has them.
inline std::map<std::string, std::string> leaseHolders(const KubeApiDouble& api,
                                                       const std::string& ns = "devlet",
                                                       const std::string& token = "",
                                                       bool nodeLeases = false) {
    const std::string path = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases";
    const auto answer =
        token.empty() ? api.request("GET", path) : api.request("GET", path, "", "application/json", token);
    std::map<std::string, std::string> result;
    boost::system::error_code ec;
    const boost::json::value doc = boost::json::parse(answer.body, ec);
    if (ec || !doc.is_object()) return result;
    for (const boost::json::value& item : doc.at("items").as_array()) {
        const boost::json::object& o = item.as_object();
        const boost::json::value* labels = o.at("metadata").as_object().if_contains("labels");
        const bool node =
            labels && labels->is_object() && labels->as_object().contains("devlet.io/node-lease");
        if (node != nodeLeases) continue;
        const boost::json::value* holder = o.at("spec").as_object().if_contains("holderIdentity");
        result[std::string(o.at("metadata").at("name").as_string())] =
            holder && holder->is_string() ? std::string(holder->as_string()) : std::string();
    }
    return result;
}

// Node Lease name ("node.<node>") -> holder.
inline std::map<std::string, std::string> nodeLeaseHolders(const KubeApiDouble& api,
                                                           const std::string& ns = "devlet",
                                                           const std::string& token = "") {
    return leaseHolders(api, ns, token, true);
}

}  // namespace devlet::test
