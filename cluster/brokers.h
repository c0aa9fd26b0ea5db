#pragma once
// Akri's brokers and services in cluster mode: for each instance this node offers whose
// configuration has a broker or service spec, the Pod, Job and Services Akri's controller
// would make, named and labelled as it names them, applied with server-side apply (field
// manager `devlet-<node>`) and deleted when the inventory withdraws the instance or the
// configuration drops the spec. Watches what it made, so an object deleted by hand is
// applied again and a broker's phase shows on the status page. Loop thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>

#include "cluster/api_client.h"
#include "runtime/inventory.h"

namespace devlet::kube {

// Akri's label keys (akri:shared/src/k8s/mod.rs).
inline constexpr char kAkriConfigurationLabel[] = "akri.sh/configuration";
inline constexpr char kAkriInstanceLabel[] = "akri.sh/instance";
inline constexpr char kAkriTargetNodeLabel[] = "akri.sh/target-node";
inline constexpr char kAkriControllerLabel[] = "controller";
inline constexpr char kAkriControllerValue[] = "akri.sh";

// Akri's names: '.' becomes '-'; a shared instance's broker Pod carries the node's name,
// since every node that sees the instance runs one.
std::string brokerPodName(const std::string& node, const std::string& instance, bool shared);
std::string brokerJobName(const std::string& instance, const std::string& jobSpecJson);
std::string instanceServiceName(const std::string& instance);
std::string configurationServiceName(const std::string& configuration);

class Brokers {
public:
    struct Options {
        std::string namespaceName;
        std::string node;
        std::chrono::milliseconds retryInterval{5000};  // after a failed apply or delete
    };
    // One broker Pod of this node, as the API last showed it.
    struct Broker {
        std::string pod;
        std::string configuration;
        std::string instance;
        std::string phase;   // Pending, Running, Succeeded, Failed, Unknown; "" before the API says
        std::string reason;  // why it failed or waits (a container's waiting/terminated reason)
        // Failed, or a container that cannot start (CrashLoopBackOff, an image that cannot be pulled)
        bool failed = false;
        bool operator==(const Broker&) const = default;
    };
    struct State {
        std::size_t applied = 0;    // objects applied and current
        std::uint64_t applies = 0;  // apply calls answered 2xx since start
        std::uint64_t deletes = 0;  // delete calls answered 2xx or 404 since start
        std::string ownerProblem;   // why the Pods have no owner (the Node cannot be read)
        // The last failed apply or delete; after a success, a spec the API still refuses
        // as invalid, or empty.
        std::string lastError;
    };

    Brokers(boost::asio::io_context& loop, ApiClient& client, const Inventory& inventory, Options options);
    ~Brokers();
    Brokers(const Brokers&) = delete;
    Brokers& operator=(const Brokers&) = delete;

    // From the first object the inventory's configurations ask for on: reads the Node (the
    // Pods' owner), watches the objects and applies what the inventory offers.
    void start();
    void stop();
    // The inventory's instances or configurations changed: reconciled after the work at hand.
    void inventoryChanged();

    const State& state() const { return state_; }
    std::vector<Broker> brokers() const;
    void onStateChanged(std::function<void()> changed) { stateChanged_ = std::move(changed); }

private:
    struct Wanted {
        std::string collection;
        std::string name;
        boost::json::object body;
    };
    // By "<resource>/<name>": every object this node should have applied now.
    std::map<std::string, Wanted> wanted(const std::vector<ConfigurationView>& views) const;
    void addPod(std::map<std::string, Wanted>& out, const Configuration& c, const InstanceView& i) const;
    void addJob(std::map<std::string, Wanted>& out, const Configuration& c, const InstanceView& i) const;
    void addService(std::map<std::string, Wanted>& out, const std::string& name, const std::string& spec,
                    const std::map<std::string, std::string>& labels, const std::string& selectorKey,
                    const std::string& selectorValue) const;
    // The watches and the Node's read, from the first object wanted on.
    void startWatching();
    void readNode();
    void reconcile();
    void answered();
    std::string standingError() const;
    void retryLater();
    void objectGone(const std::string& resource, const boost::json::object& object);
    void changed();

    boost::asio::io_context& loop_;
    ApiClient& client_;
    const Inventory& inventory_;
    Options options_;
    std::string nodeUid_;
    bool started_ = false;
    bool watching_ = false;
    bool nodeRead_ = false;
    bool recheck_ = false;  // a reconcile skipped an object whose call was in flight
    bool reconcileScheduled_ = false;
    std::map<std::string, std::string> applied_;  // key -> the body last applied (serialized)
    struct Refused {
        std::string body;
        std::string message;
    };
    std::map<std::string, Refused> refused_;    // key -> a body the API refused as invalid
    std::map<std::string, std::string> paths_;  // key -> the object's path, for deletes
    std::set<std::string> inFlight_;            // keys with an apply or delete on its way
    std::unique_ptr<Informer> pods_;
    std::unique_ptr<Informer> services_;
    std::unique_ptr<Informer> jobs_;
    boost::asio::steady_timer retryTimer_;
    State state_;
    std::function<void()> stateChanged_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once stopped
};

}  // namespace devlet::kube
