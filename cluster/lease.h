#pragma once
// A coordination.k8s.io/v1 Lease as devlet uses it: one per node, renewed while devlet runs
// (the node Lease), and one per held slot of a shared device, named after the slot, held by
// a node and alive as long as that node's Lease is renewed. Plain values; the JSON stays in
// lease.cpp.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <boost/json/object.hpp>

namespace devlet::kube {

struct Lease {
    std::string name;  // the slot's device id, "<instance>-<k>"; a node Lease's nodeLeaseName()
    std::string uid;
    std::string resourceVersion;  // opaque: compared for equality only
    std::string holder;           // spec.holderIdentity: a node name; empty when released
    int durationSeconds = 0;      // spec.leaseDurationSeconds
    std::string acquireTime;      // MicroTime, as the API wrote it
    std::string renewTime;        // MicroTime, as the API wrote it: compared for change only
    int transitions = 0;          // spec.leaseTransitions
    std::string instance;         // label devlet.io/instance
    bool node = false;            // label devlet.io/node-lease: "true": a node's own Lease
    bool operator==(const Lease&) const = default;
};

// The label every Lease devlet writes carries, so a watch sees only devlet's Leases.
inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "devlet";
inline constexpr char kInstanceLabel[] = "devlet.io/instance";
inline constexpr char kNodeLeaseLabel[] = "devlet.io/node-lease";

// The name of a node's own Lease. A slot's name ends in "-<k>" after an instance name; this
// one starts with "node." and is also told apart by its label.
std::string nodeLeaseName(const std::string& node);

// A Lease object from the API; nullopt with `error` set when it is not one.
std::optional<Lease> parseLease(const boost::json::object& object, std::string& error);
std::optional<Lease> parseLease(const std::string& json, std::string& error);  // its text

// The JSON body to create or replace a Lease: metadata (name, namespace, labels and, for a
// replace, the resourceVersion) and spec. Times are written as MicroTime.
boost::json::object leaseObject(const Lease& lease, const std::string& ns);

// RFC 3339 with microseconds in UTC ("2026-11-25T15:04:05.123456Z"), as the API's
// MicroTime is written.
std::string microTime(std::chrono::system_clock::time_point when);

}  // namespace devlet::kube
