// Akri's ONVIF credentials from Secrets in cluster mode: the real devlet in a network
// namespace, simulated cameras behind a bridge that want a UsernameToken, and the
// Kubernetes API double in devlet's namespace holding the Secret. The configuration is
// Akri's authenticated-discovery form (username_default and password_default, and a
// device_credential_list, each `valueFrom.secretKeyRef`); the node's token may read only
// that Secret, by name. A Secret that is missing, then made, then given another camera's
// entry, then deleted reaches the probe by the watch alone; no password shows in the log
// or the status.
// Skips where network namespaces cannot be created (not root).

#include <filesystem>
#include <thread>

#include <boost/json.hpp>

#include "runtime/base64.h"
#include "tests/cluster/kube_double_fixture.h"
#include "tests/integration/onvif_lab_test.h"
#include "tests/status/status_test_support.h"

namespace devlet::test {
namespace {

namespace json = boost::json;

constexpr const char* kCl = "akri.sh/onvif-auth";
constexpr const char* kDefaultPassword = "Def4ult-pass";
constexpr const char* kCameraPassword = "Cam3ra-pass";
constexpr const char* kUuid1 = "11111111-1111-4111-8111-111111111111";
constexpr const char* kUuid2 = "22222222-2222-4222-8222-222222222222";

constexpr const char* kConfiguration = R"(apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: onvif-auth
spec:
  discoveryHandler:
    name: onvif
    discoveryDetails: |
      discoveryTimeoutSeconds: 1
      interfaces: [br0]
      livenessIntervalSeconds: 1
      offerUnauthenticated: false
    discoveryProperties:
    - name: username_default
      valueFrom:
        secretKeyRef:
          name: onvif-auth-secret
          namespace: cams
          key: username
    - name: password_default
      valueFrom:
        secretKeyRef:
          name: onvif-auth-secret
          namespace: cams
          key: password
    - name: device_credential_list
      value: '["camera_list"]'
    - name: camera_list
      valueFrom:
        secretKeyRef:
          name: onvif-auth-secret
          namespace: cams
          key: cameras
          optional: true
  capacity: 1
)";

class ClusterOnvifCredentialsTest : public OnvifLabTest {
protected:
    void SetUp() override {
        OnvifLabTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        // The API double lives in devlet's namespace, where devlet can reach its loopback.
        ASSERT_TRUE(lab_->enter());
        try {
            KubeApiDouble::Options options;
            options.namespaces = {"devlet", "cams"};
            options.tokens = {"admin-token admin",
                              "node-token system:serviceaccount:devlet:devlet-node "
                              "allow=leases:get,list,watch,create,update,delete "
                              "allow=pods,services,jobs:list,watch,create,patch,delete "
                              "allow=secrets:list,watch:onvif-auth-secret"};
            api_ = std::make_unique<KubeApiDouble>(dir_.dir("api"), options);
        } catch (const std::exception& e) {
            lab_->leave();
            GTEST_SKIP() << "the Kubernetes API double cannot start: " << e.what();
        }
        lab_->leave();
        const auto kubeconfig = api_->writeKubeconfig(dir_.path() / "node.kubeconfig", "node-token");
        writeFile(daemon_->settingsFile(),
                  "kubelet:\n  podResourcesIntervalSeconds: 0.2\n  slotReleaseGraceSeconds: 0.5\n"
                  "cluster:\n  kubeconfig: " +
                      kubeconfig.string() + "\n  namespace: devlet\n");
        writeFile(daemon_->confDir() / "onvif.yaml", kConfiguration);
        ASSERT_TRUE(kubelet_->start());
    }
    void TearDown() override {
        if (HasFailure() && api_) std::cerr << "--- API double ---\n" << api_->log();
        OnvifLabTest::TearDown();
    }
    void stopInLab() override {
        if (lab_ && api_) {
            lab_->enter();
            api_.reset();
            lab_->leave();
        }
    }

    void camera(int host, const std::string& uuid, const std::string& user, const std::string& password) {
        startCamera(host, {"--uuid", uuid, "--user", user, "--password", password});
    }

    // An API request made from devlet's namespace, as the admin.
    KubeApiDouble::Response request(const std::string& method, const std::string& path,
                                    const std::string& body = "") {
        if (!lab_->enter()) return {};
        KubeApiDouble::Response response = api_->request(method, path, body);
        lab_->leave();
        return response;
    }

    // The Secret as a `kubectl create secret generic` makes it: data in base64.
    void putSecret(const std::map<std::string, std::string>& data, bool replace) {
        json::object secret{{"apiVersion", "v1"},
                            {"kind", "Secret"},
                            {"metadata", {{"name", "onvif-auth-secret"}, {"namespace", "cams"}}},
                            {"type", "Opaque"}};
        json::object encoded;
        for (const auto& [key, value] : data) encoded[key] = base64Encode(value);
        secret["data"] = std::move(encoded);
        const auto answer =
            replace
                ? request("PUT", "/api/v1/namespaces/cams/secrets/onvif-auth-secret", json::serialize(secret))
                : request("POST", "/api/v1/namespaces/cams/secrets", json::serialize(secret));
        ASSERT_EQ(answer.status, replace ? 200 : 201) << answer.body;
    }

    // The status API's body, read from devlet's namespace.
    std::string statusApi(const std::string& path) {
        if (!lab_->enter()) return {};
        const unsigned short port = statusPortFromLog(daemon_->log());
        std::string body = port ? httpGet(port, path).body : std::string();
        lab_->leave();
        return body;
    }

    // How many cameras the status API shows up with authentication.
    static std::size_t authenticated(const std::string& instances) {
        std::size_t count = 0;
        for (std::size_t at = instances.find("\"deviceState\":\"up with authentication\"");
             at != std::string::npos;
             at = instances.find("\"deviceState\":\"up with authentication\"", at + 1))
            ++count;
        return count;
    }

    std::unique_ptr<KubeApiDouble> api_;
};

TEST_F(ClusterOnvifCredentialsTest, CredentialsComeFromTheSecretAndFollowItsChanges) {
    camera(11, kUuid1, "admin", kDefaultPassword);
    camera(12, kUuid2, "operator", kCameraPassword);
    startDaemon();

    // No Secret yet: discovery runs, the status says what is missing.
    std::string status;
    EXPECT_TRUE(eventually(
        [&] {
            status = statusApi("/api/v1/status");
            return status.find("Secret cams/onvif-auth-secret does not exist") != std::string::npos;
        },
        60s))
        << status;

    // The default credential: the first camera takes it, the second refuses it.
    putSecret({{"username", "admin"}, {"password", kDefaultPassword}}, false);
    std::string instances;
    EXPECT_TRUE(eventually(
        [&] {
            instances = statusApi("/api/v1/instances");
            return authenticated(instances) == 1 &&
                   instances.find("authentication failed") != std::string::npos;
        },
        60s))
        << instances;
    EXPECT_TRUE(waitForDevices(kCl, 1, 60s));
    status = statusApi("/api/v1/status");
    EXPECT_NE(status.find("\"secretProblems\":[]"), std::string::npos) << status;
    EXPECT_NE(status.find("\"keys\":[\"password\",\"username\"]"), std::string::npos) << status;

    // The second camera's own entry, added to the Secret: both are offered.
    const std::string cameras = std::string(R"({")") + kUuid2 +
                                R"(": {"username": "operator", "password": ")" + kCameraPassword + R"("}})";
    putSecret({{"username", "admin"}, {"password", kDefaultPassword}, {"cameras", cameras}}, true);
    EXPECT_TRUE(eventually(
        [&] {
            instances = statusApi("/api/v1/instances");
            return authenticated(instances) == 2;
        },
        60s))
        << instances;
    EXPECT_TRUE(waitForDevices(kCl, 2, 60s));

    // The Secret deleted: the cameras lose their credentials, and the status says why.
    ASSERT_EQ(request("DELETE", "/api/v1/namespaces/cams/secrets/onvif-auth-secret").status, 200);
    EXPECT_TRUE(eventually(
        [&] {
            instances = statusApi("/api/v1/instances");
            status = statusApi("/api/v1/status");
            return authenticated(instances) == 0 &&
                   status.find("Secret cams/onvif-auth-secret does not exist") != std::string::npos;
        },
        60s))
        << instances << status;

    // Only the Secret named in the configuration was read, by name; no password anywhere.
    const std::string requests = request("GET", "/_double/requests").body;
    EXPECT_EQ(requests.find("\"code\":403"), std::string::npos) << requests;
    for (const std::string& shown : {daemon_->log(), statusApi("/api/v1/status"), instances}) {
        EXPECT_EQ(shown.find(kDefaultPassword), std::string::npos);
        EXPECT_EQ(shown.find(kCameraPassword), std::string::npos);
    }
}

// A Role that does not grant the Secret: devlet says so and discovers without it.
TEST_F(ClusterOnvifCredentialsTest, SecretTheRoleDoesNotGrantIsNamedInTheStatus) {
    std::string configuration = kConfiguration;
    for (std::size_t at = configuration.find("onvif-auth-secret"); at != std::string::npos;
         at = configuration.find("onvif-auth-secret", at))
        configuration.replace(at, 17, "other-secret");
    writeFile(daemon_->confDir() / "onvif.yaml", configuration);
    camera(13, kUuid1, "admin", kDefaultPassword);
    startDaemon();
    std::string status;
    EXPECT_TRUE(eventually(
        [&] {
            status = statusApi("/api/v1/status");
            return status.find(
                       "Secret cams/other-secret not read yet (listing /api/v1/namespaces/cams/secrets: "
                       "403 Forbidden") != std::string::npos;
        },
        60s))
        << status;
    // `devlet status` says it too, on a line of its own.
    ASSERT_TRUE(lab_->enter());
    const CommandResult command =
        runDevlet({"status", "--listen", "127.0.0.1:" + std::to_string(statusPortFromLog(daemon_->log()))});
    lab_->leave();
    EXPECT_NE(command.output.find("\ncluster: configuration onvif-auth: property username_default: Secret "
                                  "cams/other-secret not read yet (listing"),
              std::string::npos)
        << command.output;
    // And /metrics, for an alert.
    EXPECT_NE(statusApi("/metrics").find("\ndevlet_cluster_secret_problems 3\n"), std::string::npos);
    EXPECT_NE(daemon_->log().find("cannot read Secret cams/other-secret: listing "
                                  "/api/v1/namespaces/cams/secrets: 403 Forbidden"),
              std::string::npos);
}

}  // namespace
}  // namespace devlet::test
