// The deployment examples in examples/deployments, each against the real daemon and the
// kubelet simulator: the example's devlet configurations go into the conf dir as a user
// installs them, and the pods of its Kubernetes manifests are admitted as the kubelet
// admits them (one Allocate per container and resource, GetPreferredAllocation first),
// with every resource request read from the manifests themselves, so the examples and
// this test cannot drift apart. The camera-pool broker's shell script runs here too, against
// the live file the daemon writes for the admitted pod.
//
// Real handlers where a testbed exists: USB webcams (udev) and Intel GPUs (gpu) on a
// umockdev testbed that the forked daemon inherits (those tests skip without umockdev).
// ONVIF cameras are stood in for by debugEcho devices under the example's configuration
// name, capacity and spec.devlet: which camera a pod gets is decided by slots, resources
// and the allocation policy, not by the handler, and the onvif handler has its own end to
// end test (onvif_cameras) with simulated cameras in network namespaces.

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "tests/integration/fixture.h"

#if DEVLET_HAVE_UMOCKDEV
#include <umockdev.h>

#include "tests/probes/gpu/gpu_testbeds.h"
#include "tests/probes/usb/webcam_testbed.h"
#endif

namespace devlet::test {
namespace {

namespace fs = std::filesystem;

fs::path examplesDir() {
    const char* dir = std::getenv("DEVLET_EXAMPLES_DIR");
    return dir ? fs::path(dir) : fs::path("examples");
}

fs::path deployment(const std::string& example) {
    return examplesDir() / "deployments" / example;
}

std::vector<fs::path> filesIn(const fs::path& dir, const std::string& extension) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.is_regular_file() && entry.path().extension() == extension) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::vector<std::string> exampleNames() {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(examplesDir() / "deployments")) {
        if (entry.is_directory()) names.push_back(entry.path().filename());
    }
    std::sort(names.begin(), names.end());
    return names;
}

// --- Kubernetes manifests, as far as device requests go ---------------------------------

struct ContainerRequests {
    std::string name;
    std::map<std::string, int> devices;  // extended resources only: name -> count
};

struct Workload {
    std::string kind;
    std::string name;
    int replicas = 1;
    std::string strategy;  // a Deployment's strategy.type, "" when not set
    std::vector<ContainerRequests> containers;
};

// The resources that are not the kubelet's own (cpu, memory, hugepages-*, ...).
bool isDeviceResource(const std::string& name) {
    return name.find('/') != std::string::npos;
}

// The pod-creating documents of a manifest (Pod, Deployment, StatefulSet, DaemonSet, Job,
// ReplicaSet) with their containers' device requests; other documents are skipped.
std::vector<Workload> workloadsIn(const std::string& text, std::string& problem) {
    std::vector<Workload> workloads;
    try {
        for (const YAML::Node& doc : YAML::LoadAll(text)) {
            if (!doc.IsMap() || !doc["kind"]) continue;
            Workload w;
            w.kind = doc["kind"].as<std::string>();
            w.name = doc["metadata"]["name"].as<std::string>();
            YAML::Node podSpec;
            if (w.kind == "Pod") {
                podSpec = doc["spec"];
            } else if (w.kind == "Deployment" || w.kind == "StatefulSet" || w.kind == "DaemonSet" ||
                       w.kind == "ReplicaSet" || w.kind == "Job") {
                podSpec = doc["spec"]["template"]["spec"];
                if (doc["spec"]["replicas"]) w.replicas = doc["spec"]["replicas"].as<int>();
                if (doc["spec"]["strategy"] && doc["spec"]["strategy"]["type"])
                    w.strategy = doc["spec"]["strategy"]["type"].as<std::string>();
            } else {
                continue;
            }
            if (podSpec["initContainers"]) {
                problem = w.name + ": init containers are not modelled by this test";
                return {};
            }
            for (const YAML::Node& c : podSpec["containers"]) {
                ContainerRequests container;
                container.name = c["name"].as<std::string>();
                const YAML::Node resources = c["resources"];
                for (const char* section : {"limits", "requests"}) {
                    if (!resources || !resources[section]) continue;
                    for (const auto& entry : resources[section]) {
                        const std::string name = entry.first.as<std::string>();
                        if (!isDeviceResource(name)) continue;
                        const int count = std::stoi(entry.second.as<std::string>());
                        auto [it, inserted] = container.devices.emplace(name, count);
                        // Kubernetes requires requests == limits for extended resources.
                        if (!inserted && it->second != count) {
                            problem = w.name + "/" + container.name + ": requests and limits of " + name +
                                      " differ";
                            return {};
                        }
                    }
                }
                w.containers.push_back(std::move(container));
            }
            workloads.push_back(std::move(w));
        }
    } catch (const std::exception& e) {
        problem = e.what();
        return {};
    }
    return workloads;
}

std::vector<Workload> workloadsInFile(const fs::path& file) {
    std::string problem;
    std::vector<Workload> workloads = workloadsIn(readFile(file), problem);
    EXPECT_TRUE(problem.empty()) << file << ": " << problem;
    return workloads;
}

int documentsOfKind(const std::string& text, const std::string& kind) {
    int count = 0;
    for (const YAML::Node& doc : YAML::LoadAll(text))
        count += doc.IsMap() && doc["kind"] && doc["kind"].as<std::string>() == kind;
    return count;
}

// --- ONVIF stand-ins --------------------------------------------------------------------

// What stand-in cameras have beyond a description each.
struct StandInExtras {
    std::string availabilityFile;  // OFFLINE in it takes every stand-in away; "" = always there
    // Properties of every stand-in, as spec.brokerProperties: the onvif handler's own
    // properties (stream URIs) are per camera, which debugEcho devices cannot have.
    std::map<std::string, std::string> properties;
};

// The configuration document(s) with each onvif discovery handler replaced by `cameras`
// shared debugEcho devices (shared like network cameras); everything else as it is.
std::string withStandInCameras(const std::string& text, int cameras, const StandInExtras& extras = {}) {
    YAML::Emitter out;
    for (YAML::Node doc : YAML::LoadAll(text)) {
        if (doc["spec"] && doc["spec"]["discoveryHandler"] &&
            doc["spec"]["discoveryHandler"]["name"].as<std::string>() == "onvif") {
            std::string details = "descriptions:\n";
            for (int i = 0; i < cameras; ++i) details += "  - camera-" + std::to_string(i) + "\n";
            details += "shared: true\n";
            if (!extras.availabilityFile.empty())
                details += "availabilityFile: " + extras.availabilityFile + "\n";
            YAML::Node handler;
            handler["name"] = "debugEcho";
            handler["discoveryDetails"] = details;
            doc["spec"]["discoveryHandler"] = handler;
            for (const auto& [key, value] : extras.properties) doc["spec"]["brokerProperties"][key] = value;
            // A camera that went away stays held and listed as the onvif handler keeps it
            // (5 minutes), where a debugEcho device would be withdrawn at once.
            if (!extras.availabilityFile.empty()) doc["spec"]["devlet"]["removalGracePeriodSeconds"] = 300;
        }
        out << YAML::BeginDoc << doc;
    }
    return out.c_str();
}

std::string upper(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
    return text;
}

// "usb-cameras-3c1a2b-0" -> "usb-cameras-3c1a2b"; "usb-cameras-3c1a2b" -> "3C1A2B".
std::string instanceOf(const std::string& slot) {
    return slot.substr(0, slot.rfind('-'));
}
std::string hashOf(const std::string& instance) {
    return upper(instance.substr(instance.rfind('-') + 1));
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + 1)
        parts.push_back(text.substr(start, at - start));
    parts.push_back(text.substr(start));
    return parts;
}

// The first directory of PATH that holds an executable `name`, or "".
std::string onPath(const std::string& name) {
    const char* path = std::getenv("PATH");
    for (const std::string& dir : split(path ? path : "", ':')) {
        const fs::path candidate = fs::path(dir) / name;
        if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "";
}

std::set<std::string> hostPaths(const v1beta1::ContainerAllocateResponse& response) {
    std::set<std::string> paths;
    for (const auto& device : response.devices()) paths.insert(device.host_path());
    return paths;
}

// --- A broker script beside the test ---------------------------------------------------

// A program running while the test goes on, stdout and stderr into a file. It runs in its
// own process group, which is ended with it: a shell script's children (inotifywait, jq)
// go too.
class BackgroundProgram {
public:
    BackgroundProgram(std::vector<std::string> argv, const std::vector<std::string>& environment,
                      fs::path output)
        : output_(std::move(output)) {
        // Everything the child needs is prepared before fork: the test has threads (the
        // kubelet simulator's), so the child may only exec.
        std::vector<std::string> env;
        for (char** e = environ; *e; ++e) {
            const std::string entry = *e;
            const std::string name = entry.substr(0, entry.find('=') + 1);
            if (std::none_of(environment.begin(), environment.end(),
                             [&](const std::string& x) { return x.starts_with(name); }))
                env.push_back(entry);
        }
        env.insert(env.end(), environment.begin(), environment.end());
        std::vector<char*> argvp, envp;
        for (std::string& a : argv) argvp.push_back(a.data());
        for (std::string& e : env) envp.push_back(e.data());
        argvp.push_back(nullptr);
        envp.push_back(nullptr);
        const int fd = ::open(output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) return;
        pid_ = ::fork();
        if (pid_ == 0) {
            ::setpgid(0, 0);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            ::execve(argvp[0], argvp.data(), envp.data());
            ::_exit(127);
        }
        ::close(fd);
    }
    ~BackgroundProgram() {
        if (pid_ <= 0) return;
        ::kill(-pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
    }
    BackgroundProgram(const BackgroundProgram&) = delete;
    BackgroundProgram& operator=(const BackgroundProgram&) = delete;

    bool started() const { return pid_ > 0; }
    std::string output() const { return readFile(output_); }

private:
    fs::path output_;
    pid_t pid_ = -1;
};

// The last view watch-streams.sh printed: after the last "generation N" line, one line
// per camera, "<instance> <health> <stream URI>...".
std::map<std::string, std::string> lastView(const std::string& output) {
    std::map<std::string, std::string> view;
    for (const std::string& line : split(output, '\n')) {
        if (line.starts_with("generation ")) {
            view.clear();
        } else if (const auto space = line.find(' '); space != std::string::npos) {
            view[line.substr(0, space)] = line.substr(space + 1);
        }
    }
    return view;
}

bool waitUntil(const std::function<bool()>& predicate, std::chrono::milliseconds timeout = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!predicate()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

// --- The fixture ------------------------------------------------------------------------

// What the kubelet admitted for one pod: per container, per resource.
struct Admission {
    bool ok = false;
    std::string error;
    std::map<std::string, std::map<std::string, AllocationResult>> containers;
};

class ExamplesTest : public DaemonTest {
protected:
    // Copies the example's conf.d/*.yaml into the conf dir, onvif ones with `cameras`
    // stand-in cameras. Called again, it rewrites them: devlet reloads them as it runs.
    void install(const std::string& example, int cameras = 0, const StandInExtras& extras = {}) {
        const auto files = filesIn(deployment(example) / "conf.d", ".yaml");
        ASSERT_FALSE(files.empty()) << example;
        for (const fs::path& file : files) {
            std::string text = readFile(file);
            if (text.find("name: onvif") != std::string::npos) {
                ASSERT_GT(cameras, 0) << file << " needs stand-in cameras";
                text = withStandInCameras(text, cameras, extras);
            }
            writeFile(daemon_->confDir() / file.filename(), text);
        }
    }

    void startAll() {
        ASSERT_TRUE(kubelet_->start());
        daemon_->start();
    }

    // The pod `pod` of a workload, admitted container by container and resource by
    // resource; a refusal undoes what the pod got, as the kubelet does when admission fails.
    Admission admit(const Workload& workload, const std::string& pod) {
        Admission admission;
        for (const ContainerRequests& container : workload.containers) {
            for (const auto& [resource, count] : container.devices) {
                AllocationResult result = kubelet_->allocate("default", pod, container.name, resource, count);
                if (!result.ok) {
                    admission.error = container.name + ": " + resource + ": " + result.error;
                    kubelet_->removePod("default", pod);
                    return admission;
                }
                admission.containers[container.name][resource] = std::move(result);
            }
        }
        admission.ok = true;
        return admission;
    }

    // The status server's address, from the daemon's log (it listens on a free port).
    std::string statusAddress() {
        EXPECT_TRUE(daemon_->waitForLog("status page at http://", 20s));
        std::smatch match;
        const std::string log = daemon_->log();
        if (!std::regex_search(log, match, std::regex("status page at http://([0-9.]+:[0-9]+)/"))) return "";
        return match[1];
    }

    // Instance-level resources of a configuration that the kubelet has a live plugin for.
    std::vector<std::string> instanceResources(const std::string& configuration) {
        std::vector<std::string> out;
        const std::regex pattern("akri\\.sh/" + configuration + "-[0-9a-f]{6}");
        for (const std::string& resource : kubelet_->resources()) {
            if (std::regex_match(resource, pattern) && !kubelet_->endpoint(resource).empty())
                out.push_back(resource);
        }
        return out;
    }
};

// Every example directory holds the configurations it needs and the manifests to apply;
// the configurations are valid as they are, and a file that has the same name as a
// shipped example (examples/conf.d) or a file of another example is the same file.
TEST_F(ExamplesTest, EveryExampleHasValidConfigurationsAndManifests) {
    std::map<std::string, std::string> byName;
    for (const fs::path& file : filesIn(examplesDir() / "conf.d", ".yaml"))
        byName[file.filename()] = readFile(file);
    const auto names = exampleNames();
    EXPECT_EQ(names,
              (std::vector<std::string>{"any-free-camera", "broker-per-camera", "camera-pool",
                                        "cluster-cameras", "gpu-and-cameras", "intel-gpu-dlstreamer"}));
    for (const std::string& example : names) {
        const auto configurations = filesIn(deployment(example) / "conf.d", ".yaml");
        ASSERT_FALSE(configurations.empty()) << example;
        std::vector<std::string> check = {"config", "check"};
        for (const fs::path& file : configurations) {
            check.push_back(file);
            EXPECT_EQ(byName.emplace(file.filename(), readFile(file)).first->second, readFile(file))
                << file << " differs from another example's or examples/conf.d's file of that name";
        }
        const CommandResult result = runDevlet(check);
        EXPECT_EQ(result.exitCode, 0) << example << ":\n" << result.output;
        EXPECT_FALSE(filesIn(deployment(example) / "kubernetes", ".yaml").empty()) << example;
    }
}

// (b) A highly available Deployment over the configuration-level resource: each replica
// gets any free camera, different ones first; replicas beyond the free slots wait, and a
// replacement pod takes the camera that was freed.
TEST_F(ExamplesTest, AnyFreeCameraSpreadsReplicasOverCamerasAndReplacesThem) {
    install("any-free-camera", 3);
    startAll();
    const auto workloads = workloadsInFile(deployment("any-free-camera") / "kubernetes" / "deployment.yaml");
    ASSERT_EQ(workloads.size(), 1u);
    const Workload& frames = workloads[0];
    ASSERT_EQ(frames.containers.size(), 1u);
    ASSERT_EQ(frames.containers[0].devices.size(), 1u);
    const std::string resource = frames.containers[0].devices.begin()->first;
    EXPECT_EQ(resource, "akri.sh/onvif-cameras");
    // Three cameras with capacity 1 (as in onvif-cameras.yaml): three slots.
    ASSERT_TRUE(waitForDevices(resource, 3)) << daemon_->log();

    std::set<std::string> cameras;
    std::map<std::string, std::string> cameraOfPod;
    for (int replica = 0; replica < frames.replicas; ++replica) {
        const std::string pod = frames.name + "-" + std::to_string(replica);
        Admission admission = admit(frames, pod);
        ASSERT_TRUE(admission.ok) << admission.error;
        const auto& result = admission.containers.at("broker").at(resource);
        ASSERT_EQ(result.deviceIds.size(), 1u);
        cameraOfPod[pod] = instanceOf(result.deviceIds[0]);
        cameras.insert(cameraOfPod[pod]);
        // The broker finds its camera as Akri's broker does: a property with its hash.
        EXPECT_TRUE(result.response.envs().contains("DEBUG_ECHO_DESCRIPTION_" + hashOf(cameraOfPod[pod])));
    }
    EXPECT_EQ(cameras.size(), static_cast<std::size_t>(frames.replicas)) << "replicas share a camera";

    // Scaled up: replicas up to the free slots run; one more stays Pending.
    int replica = frames.replicas;
    for (; replica < 3; ++replica) {
        Admission admission = admit(frames, frames.name + "-" + std::to_string(replica));
        ASSERT_TRUE(admission.ok) << admission.error;
    }
    const std::string waiting = frames.name + "-" + std::to_string(replica);
    EXPECT_FALSE(admit(frames, waiting).ok);

    // A pod goes away (evicted, or its camera failed and it was deleted): the waiting
    // replica gets the camera it held.
    const std::string gone = frames.name + "-0";
    kubelet_->removePod("default", gone);
    Admission replacement = admit(frames, waiting);
    ASSERT_TRUE(replacement.ok) << replacement.error;
    EXPECT_EQ(instanceOf(replacement.containers.at("broker").at(resource).deviceIds.at(0)),
              cameraOfPod[gone]);
}

// (c) Instance pooling: a pod asking for 3 units of the pool gets 3 different cameras,
// however many slots each camera has; when fewer distinct cameras are free it is refused.
TEST_F(ExamplesTest, CameraPoolGivesEachPodThreeDifferentCameras) {
    install("camera-pool", 4);
    startAll();
    const auto workloads = workloadsInFile(deployment("camera-pool") / "kubernetes" / "multi-view.yaml");
    ASSERT_EQ(workloads.size(), 1u);
    const Workload& pod = workloads[0];
    ASSERT_EQ(pod.kind, "Pod");
    ASSERT_EQ(pod.containers.size(), 1u);
    const auto& [resource, count] = *pod.containers[0].devices.begin();
    EXPECT_EQ(resource, "akri.sh/camera-pool");
    EXPECT_EQ(count, 3);
    // Four cameras with capacity 2 (camera-pool.yaml): eight slots.
    ASSERT_TRUE(waitForDevices(resource, 8)) << daemon_->log();

    for (const std::string name : {"multi-view-a", "multi-view-b"}) {
        Admission admission = admit(pod, name);
        ASSERT_TRUE(admission.ok) << name << ": " << admission.error;
        const AllocationResult& result = admission.containers.at("broker").at(resource);
        std::set<std::string> cameras;
        for (const std::string& slot : result.deviceIds) cameras.insert(instanceOf(slot));
        EXPECT_EQ(cameras.size(), static_cast<std::size_t>(count)) << name << " got a camera twice";
        // What the pod's loop reads: the instances, and one suffixed property per camera.
        const auto& envs = result.response.envs();
        ASSERT_TRUE(envs.contains("DEVLET_INSTANCES"));
        const auto listed = split(envs.at("DEVLET_INSTANCES"), ',');
        EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), cameras);
        for (const std::string& camera : cameras)
            EXPECT_TRUE(envs.contains("DEBUG_ECHO_DESCRIPTION_" + hashOf(camera))) << camera;
    }
    // Two slots are left, on two cameras: a third pod of 3 cannot be admitted.
    Admission third = admit(pod, "multi-view-c");
    EXPECT_FALSE(third.ok);

    // uniqueDevices is a hard rule: two slots of one camera for one pod are refused even
    // when a kubelet asks for exactly that. Once multi-view-a is gone, some camera has
    // both its slots free.
    kubelet_->removePod("default", "multi-view-a");
    std::map<std::string, int> heldPerCamera;
    for (const auto& a : kubelet_->allocations())
        for (const auto& id : a.deviceIds) heldPerCamera[instanceOf(id)]++;
    std::string idle;
    for (const auto& [id, state] : health(resource))
        if (heldPerCamera[instanceOf(id)] == 0) idle = instanceOf(id);
    ASSERT_FALSE(idle.empty());
    AllocationResult twice =
        kubelet_->allocateIds("default", "greedy", "broker", resource, {idle + "-0", idle + "-1"});
    EXPECT_FALSE(twice.ok);
    EXPECT_NE(twice.error.find("requires distinct devices"), std::string::npos) << twice.error;
}

// The camera-pool broker's script (camera-pool/broker/watch-streams.sh, which the pod's
// manifest carries in a ConfigMap) against the live file the real daemon keeps for the
// pod: while the pod runs, its cameras' stream URIs change and the cameras go away and
// come back, and the script prints each new view. Once with inotifywait, once polling.
class CameraPoolBrokerTest : public ExamplesTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(CameraPoolBrokerTest, BrokerPrintsTheNewStreamUrisWhileThePodRuns) {
    const fs::path script = deployment("camera-pool") / "broker" / "watch-streams.sh";
    const fs::path manifest = deployment("camera-pool") / "kubernetes" / "multi-view.yaml";
    std::string carried;
    for (const YAML::Node& doc : YAML::LoadAll(readFile(manifest))) {
        if (doc["kind"] && doc["kind"].as<std::string>() == "ConfigMap")
            carried = doc["data"]["watch-streams.sh"].as<std::string>();
    }
    EXPECT_EQ(carried, readFile(script)) << manifest << " does not carry " << script << " as it is";

    const std::string jq = onPath("jq");
    if (jq.empty()) GTEST_SKIP() << "jq is not installed (scripts/install-deps installs it)";
    std::vector<std::string> environment;
    if (GetParam() == "inotifywait") {
        if (onPath("inotifywait").empty())
            GTEST_SKIP() << "inotifywait is not installed (inotify-tools, scripts/install-deps installs it)";
    } else {
        // jq and sleep only: without inotifywait the script reads the file again and again.
        const fs::path bin = dir_.path() / "bin-without-inotifywait";
        fs::create_directories(bin);
        fs::create_symlink(jq, bin / "jq");
        fs::create_symlink(onPath("sleep"), bin / "sleep");
        environment = {"PATH=" + bin.string(), "DEVLET_POLL_SECONDS=0.2"};
    }

    const fs::path availability = dir_.path() / "cameras-available";
    writeFile(availability, "\n");
    const auto streamsAt = [&](const std::string& host) {
        return StandInExtras{availability,
                             {{"ONVIF_STREAM_0_URI", "rtsp://" + host + "/stream0"},
                              {"ONVIF_STREAM_1_URI", "rtsp://" + host + "/stream1"}}};
    };
    install("camera-pool", 3, streamsAt("192.0.2.10"));
    startAll();
    const auto workloads = workloadsInFile(manifest);
    ASSERT_EQ(workloads.size(), 1u);
    ASSERT_TRUE(waitForDevices("akri.sh/camera-pool", 6)) << daemon_->log();
    Admission admission = admit(workloads[0], "multi-view");
    ASSERT_TRUE(admission.ok) << admission.error;
    const AllocationResult& result = admission.containers.at("broker").at("akri.sh/camera-pool");
    std::set<std::string> cameras;
    for (const std::string& slot : result.deviceIds) cameras.insert(instanceOf(slot));
    ASSERT_EQ(cameras.size(), 3u);

    // The file the container reads, where the kubelet mounts it from.
    const auto& envs = result.response.envs();
    ASSERT_TRUE(envs.contains("DEVLET_INFO_FILE"));
    const fs::path inContainer = envs.at("DEVLET_INFO_FILE");
    fs::path file;
    for (const auto& mount : result.response.mounts()) {
        if (mount.container_path() == inContainer.parent_path())
            file = fs::path(mount.host_path()) / inContainer.filename();
    }
    ASSERT_FALSE(file.empty()) << "no mount holds " << inContainer;

    environment.push_back("DEVLET_INFO_FILE=" + file.string());
    const BackgroundProgram broker({"/bin/sh", script}, environment, dir_.path() / "broker.out");
    ASSERT_TRUE(broker.started());
    const auto showsEveryCamera = [&](const std::string& line) {
        std::map<std::string, std::string> want;
        for (const std::string& camera : cameras) want[camera] = line;
        return waitUntil([&] { return lastView(broker.output()) == want; });
    };
    ASSERT_TRUE(showsEveryCamera("present rtsp://192.0.2.10/stream0 rtsp://192.0.2.10/stream1"))
        << broker.output();

    // New stream URIs (a camera's new address): the container's environment keeps the old.
    install("camera-pool", 3, streamsAt("192.0.2.20"));
    ASSERT_TRUE(showsEveryCamera("present rtsp://192.0.2.20/stream0 rtsp://192.0.2.20/stream1"))
        << broker.output() << readFile(file);

    writeFile(availability, "OFFLINE\n");
    ASSERT_TRUE(showsEveryCamera("gone rtsp://192.0.2.20/stream0 rtsp://192.0.2.20/stream1"))
        << broker.output() << readFile(file);
    writeFile(availability, "\n");
    ASSERT_TRUE(showsEveryCamera("present rtsp://192.0.2.20/stream0 rtsp://192.0.2.20/stream1"))
        << broker.output() << readFile(file);
}

INSTANTIATE_TEST_SUITE_P(WatchedOrPolled, CameraPoolBrokerTest, ::testing::Values("inotifywait", "polling"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

#if DEVLET_HAVE_UMOCKDEV

// Examples that need devices on a umockdev testbed the daemon inherits.
class TestbedExamplesTest : public ExamplesTest {
protected:
    void SetUp() override {
        const char* preload = std::getenv("LD_PRELOAD");
        if (!preload || !std::strstr(preload, "libumockdev-preload"))
            GTEST_SKIP() << "not running under umockdev-wrapper, which the device testbed needs";
        testbed_ = umockdev_testbed_new();
        ASSERT_TRUE(testbed_);
        ExamplesTest::SetUp();
    }
    void TearDown() override {
        ExamplesTest::TearDown();
        if (testbed_) g_object_unref(testbed_);
    }

    void add(const std::string& description) {
        GError* error = nullptr;
        ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, description.c_str(), &error))
            << (error ? error->message : "unknown error");
    }
    // The recorded C920's controller and hub, and `count` webcams of that model on hub
    // ports 1-1.2, 1-1.3, ... with capture nodes /dev/video0, /dev/video2, ...
    void addWebcams(int count) {
        add(webcamHostTestbed());
        for (int i = 0; i < count; ++i)
            add(anotherWebcamTestbed("1-1." + std::to_string(2 + i), 3 + i, 2 * i));
    }
    void addGpus() {
        for (const std::string& gpu : fourArcGpusOnTwoNumaNodes()) add(gpu);
    }

    UMockdevTestbed* testbed_ = nullptr;
};

// (a) One broker per camera: render-brokers writes one Deployment and Service per webcam
// devlet offers, each asking for that webcam's instance-level resource, and each broker
// gets its own webcam's node.
TEST_F(TestbedExamplesTest, BrokerPerCameraGivesEveryWebcamItsOwnBroker) {
    addWebcams(3);
    install("broker-per-camera");
    startAll();
    ASSERT_TRUE(waitForDevices("akri.sh/usb-cameras", 3, 20s)) << daemon_->log();
    ASSERT_TRUE(kubelet_->waitFor([&] { return instanceResources("usb-cameras").size() == 3; }, 20s))
        << daemon_->log();

    const std::string address = statusAddress();
    ASSERT_FALSE(address.empty());
    const CommandResult rendered = runProgram(
        {"/bin/sh", deployment("broker-per-camera") / "render-brokers", "usb-cameras", "--listen", address},
        {"DEVLET=" + DaemonProcess::binary()});
    ASSERT_EQ(rendered.exitCode, 0) << rendered.output;
    EXPECT_EQ(documentsOfKind(rendered.output, "Service"), 3) << rendered.output;
    std::string problem;
    const auto brokers = workloadsIn(rendered.output, problem);
    ASSERT_TRUE(problem.empty()) << problem;
    ASSERT_EQ(brokers.size(), 3u) << rendered.output;

    std::set<std::string> resources;
    std::set<std::string> nodes;
    for (const Workload& broker : brokers) {
        // One webcam with capacity 1: a rolling update would wait for the slot forever.
        EXPECT_EQ(broker.strategy, "Recreate") << broker.name;
        ASSERT_EQ(broker.replicas, 1) << broker.name;
        ASSERT_EQ(broker.containers.size(), 1u);
        ASSERT_EQ(broker.containers[0].devices.size(), 1u);
        const auto& [resource, count] = *broker.containers[0].devices.begin();
        EXPECT_EQ(count, 1);
        resources.insert(resource);
        const std::string instance = resource.substr(resource.find('/') + 1);
        EXPECT_EQ(broker.name, instance + "-broker");

        Admission admission = admit(broker, broker.name + "-pod");
        ASSERT_TRUE(admission.ok) << admission.error;
        const AllocationResult& result = admission.containers.at("broker").at(resource);
        ASSERT_EQ(result.deviceIds, std::vector<std::string>{instance + "-0"});
        const auto& envs = result.response.envs();
        // Akri's udev-video-broker opens UDEV_DEVNODE_<HASH>.
        ASSERT_TRUE(envs.contains("UDEV_DEVNODE_" + hashOf(instance))) << instance;
        const std::string node = envs.at("UDEV_DEVNODE_" + hashOf(instance));
        EXPECT_EQ(hostPaths(result.response), std::set<std::string>{node});
        nodes.insert(node);
        // A second broker for the same webcam waits: the webcam has one slot.
        EXPECT_FALSE(admit(broker, broker.name + "-second").ok) << broker.name;
    }
    EXPECT_EQ(std::vector<std::string>(resources.begin(), resources.end()), instanceResources("usb-cameras"));
    EXPECT_EQ(nodes, (std::set<std::string>{"/dev/video0", "/dev/video2", "/dev/video4"}));
}

// (d) Resource grouping: one container asks for a GPU and two webcams and gets one GPU's
// nodes and two different webcams.
TEST_F(TestbedExamplesTest, GpuAndTwoCamerasLandInOneContainer) {
    addGpus();
    addWebcams(2);
    install("gpu-and-cameras");
    startAll();
    const auto workloads =
        workloadsInFile(deployment("gpu-and-cameras") / "kubernetes" / "two-camera-analytics.yaml");
    ASSERT_EQ(workloads.size(), 1u);
    const Workload& analytics = workloads[0];
    ASSERT_EQ(analytics.containers.size(), 1u);
    EXPECT_EQ(analytics.containers[0].devices,
              (std::map<std::string, int>{{"gpu.intel.com/i915", 1}, {"akri.sh/usb-cameras", 2}}));
    ASSERT_TRUE(waitForDevices("gpu.intel.com/i915", 8, 20s)) << daemon_->log();
    ASSERT_TRUE(waitForDevices("akri.sh/usb-cameras", 2, 20s)) << daemon_->log();

    Admission admission = admit(analytics, "two-camera-analytics-0");
    ASSERT_TRUE(admission.ok) << admission.error;
    const auto& got = admission.containers.at(analytics.containers[0].name);

    const AllocationResult& gpu = got.at("gpu.intel.com/i915");
    ASSERT_EQ(gpu.deviceIds.size(), 1u);
    const auto gpuNodes = hostPaths(gpu.response);
    ASSERT_TRUE(gpu.response.envs().contains("GPU_RENDER_NODE"));
    EXPECT_TRUE(gpuNodes.contains(gpu.response.envs().at("GPU_RENDER_NODE")));
    EXPECT_TRUE(gpuNodes.contains(gpu.response.envs().at("GPU_CARD_NODE")));

    const AllocationResult& webcams = got.at("akri.sh/usb-cameras");
    ASSERT_EQ(webcams.deviceIds.size(), 2u);
    EXPECT_NE(instanceOf(webcams.deviceIds[0]), instanceOf(webcams.deviceIds[1]));
    EXPECT_EQ(hostPaths(webcams.response), (std::set<std::string>{"/dev/video0", "/dev/video2"}));
    const auto& envs = webcams.response.envs();
    for (const std::string& instance : split(envs.at("DEVLET_INSTANCES"), ','))
        EXPECT_TRUE(envs.contains("UDEV_DEVNODE_" + hashOf(instance))) << instance;

    // A second replica finds GPUs but no free webcam: it is not admitted, and the GPU
    // share it got first is not kept.
    EXPECT_FALSE(admit(analytics, "two-camera-analytics-1").ok);
    for (const auto& a : kubelet_->allocations()) EXPECT_NE(a.pod, "two-camera-analytics-1");
}

// (e) A workload written for Intel's GPU plugin, unchanged: gpu.intel.com/i915 is served
// by devlet's gpu configuration, each replica gets the card and render node of a GPU.
TEST_F(TestbedExamplesTest, DlStreamerWorkerRunsUnchangedOnIntelsResourceName) {
    addGpus();
    install("intel-gpu-dlstreamer");
    startAll();
    const auto workloads =
        workloadsInFile(deployment("intel-gpu-dlstreamer") / "kubernetes" / "dlstreamer-gpu-worker.yaml");
    ASSERT_EQ(workloads.size(), 1u);
    const Workload& worker = workloads[0];
    ASSERT_EQ(worker.containers.size(), 1u);
    EXPECT_EQ(worker.containers[0].devices, (std::map<std::string, int>{{"gpu.intel.com/i915", 1}}));
    // Four GPUs, each shared by two containers (capacity 2 in gpu-intel.yaml).
    ASSERT_TRUE(waitForDevices("gpu.intel.com/i915", 8, 20s)) << daemon_->log();
    // The configuration's resource may list all eight slots before the last GPU's own
    // plugin has registered.
    EXPECT_TRUE(kubelet_->waitFor([&] { return instanceResources("intel-gpu-i915").size() == 4; }, 20s))
        << daemon_->log();

    std::set<std::string> gpus;
    for (int replica = 0; replica < worker.replicas; ++replica) {
        Admission admission = admit(worker, worker.name + "-" + std::to_string(replica));
        ASSERT_TRUE(admission.ok) << admission.error;
        const AllocationResult& result = admission.containers.at("worker").at("gpu.intel.com/i915");
        ASSERT_EQ(result.deviceIds.size(), 1u);
        gpus.insert(instanceOf(result.deviceIds[0]));
        const auto nodes = hostPaths(result.response);
        ASSERT_EQ(nodes.size(), 2u);
        const auto& envs = result.response.envs();
        EXPECT_TRUE(nodes.contains(envs.at("GPU_CARD_NODE")));
        EXPECT_TRUE(nodes.contains(envs.at("GPU_RENDER_NODE")));
        EXPECT_EQ(envs.at("GPU_RENDER_NODE").rfind("/dev/dri/renderD", 0), 0u);
        EXPECT_EQ(envs.at("GPU_DRIVER"), "i915");
    }
    // allocationPolicy balanced (gpu-intel.yaml): the replicas go to different GPUs.
    EXPECT_EQ(gpus.size(), static_cast<std::size_t>(worker.replicas));
}

#endif

}  // namespace
}  // namespace devlet::test

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
