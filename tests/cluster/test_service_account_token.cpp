// The kubeconfig's ServiceAccount token: what devlet reads from it (exp, iat, the account,
// the audiences), the rule for when it is renewed, the retry delays, and the kubeconfig
// written again with the new token, byte for byte otherwise, mode and owner kept.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cluster/service_account_token.h"
#include "tests/support/temp_dir.h"

namespace devlet::kube {
namespace {

std::string base64Url(const std::string& text) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    unsigned bits = 0;
    int count = 0;
    for (unsigned char c : text) {
        bits = (bits << 8) | c;
        count += 8;
        while (count >= 6) {
            out += kAlphabet[(bits >> (count - 6)) & 63];
            count -= 6;
        }
    }
    if (count > 0) out += kAlphabet[(bits << (6 - count)) & 63];
    return out;
}

std::string jwt(const std::string& payload) {
    return base64Url(R"({"alg":"RS256","kid":"k"})") + "." + base64Url(payload) + ".c2lnbmF0dXJl";
}

constexpr std::int64_t kIat = 1'700'000'000;
constexpr std::int64_t kDay = 86400;

TEST(ServiceAccountToken, ReadsTheClaimsOfAKubectlCreateToken) {
    const TokenClaims c = readTokenClaims(jwt(
        R"({"aud":["https://kubernetes.default.svc.cluster.local","k3s"],"exp":1700003600,"iat":1700000000,)"
        R"("iss":"https://kubernetes.default.svc.cluster.local","kubernetes.io":{"namespace":"devlet",)"
        R"("serviceaccount":{"name":"devlet-node","uid":"u-1"}},"nbf":1700000000,)"
        R"("sub":"system:serviceaccount:devlet:devlet-node"})"));
    EXPECT_EQ(c.kind, TokenClaims::Kind::Expiring);
    EXPECT_EQ(c.expiresAt, 1'700'003'600);
    EXPECT_EQ(c.issuedAt, kIat);
    EXPECT_EQ(c.serviceAccountNamespace, "devlet");
    EXPECT_EQ(c.serviceAccountName, "devlet-node");
    EXPECT_EQ(c.audiences, (std::vector<std::string>{"https://kubernetes.default.svc.cluster.local", "k3s"}));
    EXPECT_EQ(c.problem, "");
}

TEST(ServiceAccountToken, TakesTheAccountFromSubWithoutTheKubernetesClaim) {
    const TokenClaims c =
        readTokenClaims(jwt(R"({"aud":"api","exp":1700003600,"sub":"system:serviceaccount:ops:edge"})"));
    EXPECT_EQ(c.kind, TokenClaims::Kind::Expiring);
    EXPECT_EQ(c.serviceAccountNamespace, "ops");
    EXPECT_EQ(c.serviceAccountName, "edge");
    EXPECT_EQ(c.audiences, std::vector<std::string>{"api"});
    EXPECT_EQ(c.issuedAt, 0);
}

TEST(ServiceAccountToken, ALegacySecretTokenDoesNotExpire) {
    const TokenClaims c = readTokenClaims(
        jwt(R"({"iss":"kubernetes/serviceaccount","kubernetes.io/serviceaccount/namespace":"devlet",)"
            R"("sub":"system:serviceaccount:devlet:devlet-node"})"));
    EXPECT_EQ(c.kind, TokenClaims::Kind::DoesNotExpire);
}

TEST(ServiceAccountToken, WhatIsNoJwtIsSaidAndLeftAlone) {
    struct Case {
        std::string token;
        std::string problem;
    };
    const std::vector<Case> cases = {
        {"K10a8b5c3f2e.server:token", "not a JSON Web Token"},
        {"a.b", "not a JSON Web Token"},
        {"a.b.c.d", "not a JSON Web Token"},
        {"x.@@@.y", "not a JSON Web Token (its payload is not base64url)"},
        {"x." + base64Url("not json") + ".y", "not a JSON Web Token (its payload is not a JSON object)"},
        {"x." + base64Url("[1]") + ".y", "not a JSON Web Token (its payload is not a JSON object)"},
    };
    for (const Case& c : cases) {
        const TokenClaims claims = readTokenClaims(c.token);
        EXPECT_EQ(claims.kind, TokenClaims::Kind::NotAJwt) << c.token;
        EXPECT_EQ(claims.problem, c.problem) << c.token;
        // The token itself is never in a message.
        EXPECT_EQ(claims.problem.find(c.token), std::string::npos);
    }
}

TEST(ServiceAccountToken, AnExpiringTokenWithoutAnAccountCannotBeRenewed) {
    const TokenClaims c = readTokenClaims(jwt(R"({"exp":1700003600,"sub":"alice"})"));
    EXPECT_EQ(c.kind, TokenClaims::Kind::Expiring);
    EXPECT_EQ(c.problem, "the token names no ServiceAccount (sub is not system:serviceaccount:NS:NAME)");
}

TEST(ServiceAccountToken, RenewalIsDueAtEightyPercentOrADayWhicheverComesFirst) {
    struct Case {
        std::int64_t iat, exp, due;
    };
    const std::vector<Case> cases = {
        {kIat, kIat + 60, kIat + 48},            // a test's minute: after 48 s
        {kIat, kIat + 600, kIat + 480},          // the shortest a TokenRequest gives
        {kIat, kIat + 3600, kIat + 2880},        // kubectl create token's default hour
        {kIat, kIat + 30 * 3600, kIat + kDay},   // 80 % would be 24 h: the day
        {kIat, kIat + 2 * kDay, kIat + kDay},    // the day comes first
        {kIat, kIat + 365 * kDay, kIat + kDay},  // node-kubeconfig's 8760h: daily
        {0, kIat + 10 * kDay, kIat + 9 * kDay},  // no iat: a day before exp
        {kIat + 5, kIat, kIat - kDay},           // iat after exp: as without iat
    };
    for (const Case& c : cases) {
        TokenClaims claims;
        claims.kind = TokenClaims::Kind::Expiring;
        claims.issuedAt = c.iat;
        claims.expiresAt = c.exp;
        EXPECT_EQ(renewalDueAt(claims), c.due) << c.iat << " " << c.exp;
    }
}

TEST(ServiceAccountToken, TheNewTokenIsAskedForWithTheOldLifetime) {
    struct Case {
        std::int64_t iat, exp, lifetime;
    };
    const std::vector<Case> cases = {
        {kIat, kIat + 365 * kDay, 365 * kDay},
        {kIat, kIat + 3600, 3600},
        {kIat, kIat + 60, 600},  // capped short by the server: ask for the least it accepts
        {0, kIat, 0},            // unknown: the server's default
    };
    for (const Case& c : cases) {
        TokenClaims claims;
        claims.issuedAt = c.iat;
        claims.expiresAt = c.exp;
        EXPECT_EQ(requestedLifetimeSeconds(claims), c.lifetime) << c.iat << " " << c.exp;
    }
}

TEST(ServiceAccountToken, RetriesBackOffButComeCloserBeforeExpiry) {
    struct Case {
        int failures;
        std::int64_t left;
        std::int64_t delay;
    };
    const std::vector<Case> cases = {
        {1, kDay, 10}, {2, kDay, 20}, {3, kDay, 40}, {6, kDay, 300}, {40, kDay, 300},
        {6, 400, 100}, {1, 20, 5},    {3, 3, 1},     {2, 0, 20},     {9, -50, 300},
    };
    for (const Case& c : cases)
        EXPECT_EQ(renewalRetryDelay(c.failures, kIat, kIat + c.left).count(), c.delay)
            << c.failures << " " << c.left;
}

TEST(ServiceAccountToken, OnlyTheTokenTextIsReplaced) {
    const std::string text = "users:\n- name: devlet\n  user:\n    token: aaa.bbb.ccc  # node-a\n";
    EXPECT_EQ(replaceTokenText(text, "aaa.bbb.ccc", "ddd.eee.fff"),
              "users:\n- name: devlet\n  user:\n    token: ddd.eee.fff  # node-a\n");
    EXPECT_EQ(replaceTokenText(text, "xxx.yyy.zzz", "ddd.eee.fff"), std::nullopt);
    EXPECT_EQ(replaceTokenText(text + "# aaa.bbb.ccc\n", "aaa.bbb.ccc", "d"), std::nullopt);
    EXPECT_EQ(replaceTokenText(text, "", "d"), std::nullopt);
}

TEST(ServiceAccountToken, TheFileIsReplacedWithItsModeAndNothingLeftBeside) {
    test::TempDir dir;
    const std::string path = dir.file("kubeconfig", "old\n");
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
    struct stat before {};
    ASSERT_EQ(::stat(path.c_str(), &before), 0);
    EXPECT_EQ(replaceFileDurably(path, "new text\n"), "");
    std::ifstream in(path);
    std::stringstream read;
    read << in.rdbuf();
    EXPECT_EQ(read.str(), "new text\n");
    struct stat after {};
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_mode & 07777, 0600u);
    EXPECT_EQ(after.st_uid, before.st_uid);
    EXPECT_NE(after.st_ino, before.st_ino);  // renamed over, not written in place
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    EXPECT_EQ(entries, 1u);
    EXPECT_NE(replaceFileDurably((dir.path() / "missing").string(), "x"), "");
}

TEST(ServiceAccountToken, TimesAreWrittenAsTheApiWritesThem) {
    EXPECT_EQ(formatUnixTime(kIat), "2023-11-14T22:13:20Z");
}

}  // namespace
}  // namespace devlet::kube
