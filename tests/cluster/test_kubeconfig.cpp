// The kubeconfig reader: what it takes, what it refuses and how it says so, and the token
// file read again when it rotates.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cluster/kubeconfig.h"
#include "tests/support/temp_dir.h"

namespace devlet::kube {
namespace {

const std::string kCa = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string base64(const std::string& text) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < text.size(); i += 3) {
        const unsigned v =
            (unsigned char)text[i] << 16 | (unsigned char)text[i + 1] << 8 | (unsigned char)text[i + 2];
        out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], kAlphabet[v & 63]};
    }
    if (text.size() - i == 1) {
        const unsigned v = (unsigned char)text[i] << 16;
        out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], '=', '='};
    } else if (text.size() - i == 2) {
        const unsigned v = (unsigned char)text[i] << 16 | (unsigned char)text[i + 1] << 8;
        out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
    }
    return out;
}

std::string kubeconfig(const std::string& cluster, const std::string& user) {
    return "apiVersion: v1\nkind: Config\ncurrent-context: edge\n"
           "contexts:\n- name: other\n  context: {cluster: nowhere, user: nobody}\n"
           "- name: edge\n  context:\n    cluster: k3s\n    user: devlet\n"
           "clusters:\n- name: k3s\n  cluster:\n" +
           cluster + "users:\n- name: devlet\n  user:\n" + user;
}

std::string secretFile(const test::TempDir& dir, const std::string& name, const std::string& text) {
    std::string path = dir.file(name, text);
    ::chmod(path.c_str(), 0600);
    return path;
}

TEST(Kubeconfig, ReadsTheCurrentContextsServerCaDataAndToken) {
    auto load = parseKubeconfig(
        kubeconfig("    server: https://10.0.0.1:6443\n    certificate-authority-data: " + base64(kCa) + "\n",
                   "    token: abc.def\n"),
        "kc", "/etc");
    ASSERT_TRUE(load.config) << load.error;
    EXPECT_EQ(load.config->context, "edge");
    EXPECT_EQ(load.config->host, "10.0.0.1");
    EXPECT_EQ(load.config->port, "6443");
    EXPECT_EQ(load.config->caPem, kCa);
    EXPECT_EQ(load.config->token, "abc.def");
}

TEST(Kubeconfig, ReadsFilesRelativeToTheKubeconfig) {
    test::TempDir dir;
    dir.file("ca.pem", kCa);
    secretFile(dir, "token", "tok\n");
    auto load = parseKubeconfig(
        kubeconfig("    server: https://api.example:443/prefix/\n    certificate-authority: ca.pem\n",
                   "    tokenFile: token\n"),
        "kc", dir.path());
    ASSERT_TRUE(load.config) << load.error;
    EXPECT_EQ(load.config->caPem, kCa);
    EXPECT_EQ(load.config->tokenFile, dir.path().string() + "/token");
    EXPECT_EQ(load.config->host, "api.example");
    EXPECT_EQ(load.config->pathPrefix, "/prefix");
}

TEST(Kubeconfig, ReadsAClientCertificateAndKey) {
    auto load = parseKubeconfig(
        kubeconfig("    server: https://[fd00::1]\n", "    client-certificate-data: " + base64("CERT") +
                                                          "\n    client-key-data: " + base64("KEY") + "\n"),
        "kc", "/");
    ASSERT_TRUE(load.config) << load.error;
    EXPECT_EQ(load.config->host, "fd00::1");
    EXPECT_EQ(load.config->port, "443");
    EXPECT_EQ(load.config->clientCertificatePem, "CERT");
    EXPECT_EQ(load.config->clientKeyPem, "KEY");
}

struct Refusal {
    std::string cluster, user, words;
};

TEST(Kubeconfig, RefusesWhatItCannotHonourNamingTheField) {
    const std::string server = "    server: https://a:6443\n";
    const std::vector<Refusal> cases = {
        {server + "    insecure-skip-tls-verify: true\n", "    token: t\n", "insecure-skip-tls-verify"},
        {"    server: http://a:8080\n", "    token: t\n", "server \"http://a:8080\""},
        {"    server: https://a:99999\n", "    token: t\n", "must be https://HOST[:PORT]"},
        {server + "    certificate-authority-data: '%%%'\n", "    token: t\n",
         "certificate-authority-data is not base64"},
        {server + "    certificate-authority: /nonexistent/ca.pem\n", "    token: t\n",
         "certificate-authority: cannot read"},
        {server, "    exec: {command: aws}\n", "user \"devlet\".exec"},
        {server, "    username: admin\n    password: secret\n", "basic authentication"},
        {server, "    client-certificate-data: " + base64("C") + "\n", "needs both"},
        {server, "    {}\n", "has no credentials"},
        {server + "    proxy-url: http://p\n", "    token: t\n", "proxy-url"},
    };
    for (const auto& c : cases) {
        auto load = parseKubeconfig(kubeconfig(c.cluster, c.user), "kc", "/");
        EXPECT_FALSE(load.config) << c.words;
        EXPECT_NE(load.error.find(c.words), std::string::npos) << load.error;
        EXPECT_EQ(load.error.find("secret"), std::string::npos) << load.error;
    }
}

TEST(Kubeconfig, SaysWhichContextOrClusterIsMissing) {
    auto noContext = parseKubeconfig("current-context: x\ncontexts: []\n", "kc", "/");
    EXPECT_NE(noContext.error.find("no entry \"x\" in contexts"), std::string::npos) << noContext.error;
    auto noCurrent = parseKubeconfig("clusters: []\n", "kc", "/");
    EXPECT_NE(noCurrent.error.find("no current-context"), std::string::npos) << noCurrent.error;
    auto broken = parseKubeconfig("current-context: [\n", "kc", "/");
    EXPECT_NE(broken.error.find("YAML syntax error"), std::string::npos) << broken.error;
    auto notMapping = parseKubeconfig("- a\n", "kc", "/");
    EXPECT_NE(notMapping.error.find("not a kubeconfig"), std::string::npos) << notMapping.error;
}

TEST(Kubeconfig, RefusesAFileOpenToOthers) {
    test::TempDir dir;
    std::string path = dir.file("kubeconfig", kubeconfig("    server: https://a\n", "    token: t\n"));
    ::chmod(path.c_str(), 0644);
    auto load = loadKubeconfig(path);
    EXPECT_FALSE(load.config);
    EXPECT_NE(load.error.find("mode 0644"), std::string::npos) << load.error;
    ::chmod(path.c_str(), 0600);
    load = loadKubeconfig(path);
    EXPECT_TRUE(load.config) << load.error;
    auto missing = loadKubeconfig(dir.path().string() + "/none");
    EXPECT_NE(missing.error.find("No such file"), std::string::npos) << missing.error;
}

TEST(Kubeconfig, RefusesATokenFileOrKeyOpenToOthers) {
    test::TempDir dir;
    std::string token = dir.file("token", "t");
    ::chmod(token.c_str(), 0640);
    auto load =
        parseKubeconfig(kubeconfig("    server: https://a\n", "    tokenFile: token\n"), "kc", dir.path());
    EXPECT_NE(load.error.find("user \"devlet\".tokenFile"), std::string::npos) << load.error;
    std::string key = dir.file("key", "K");
    ::chmod(key.c_str(), 0604);
    load =
        parseKubeconfig(kubeconfig("    server: https://a\n",
                                   "    client-certificate-data: " + base64("C") + "\n    client-key: key\n"),
                        "kc", dir.path());
    EXPECT_NE(load.error.find("client-key"), std::string::npos) << load.error;
}

TEST(Kubeconfig, ReadsATokenFileAgainWhenItChanges) {
    test::TempDir dir;
    std::string path = secretFile(dir, "token", "first\n");
    Kubeconfig config;
    config.tokenFile = path;
    BearerToken token(config);
    std::string error;
    EXPECT_EQ(token.current(error).value_or("?"), "first");
    // Written whole and renamed into place, as kubelet and projected volumes do.
    test::writeFile(dir.path() / "token", "second-and-longer");
    EXPECT_EQ(token.current(error).value_or("?"), "second-and-longer");
    std::filesystem::remove(path);
    EXPECT_FALSE(token.current(error));
    EXPECT_NE(error.find("token file"), std::string::npos);
    secretFile(dir, "token", "");
    EXPECT_FALSE(token.current(error));
    EXPECT_NE(error.find("is empty"), std::string::npos);
}

}  // namespace
}  // namespace devlet::kube
