#include "runtime/naming.h"

#include <charconv>
#include <cstdint>
#include <iterator>
#include <string>

#include <blake2.h>

namespace devlet {

namespace {

// Limits from k8s.io/apimachinery/pkg/util/validation.
constexpr std::size_t kQualifiedNameMaxLength = 63;
constexpr std::size_t kDns1123SubdomainMaxLength = 253;
constexpr std::size_t kDns1123LabelMaxLength = 63;
constexpr std::string_view kRequestsPrefix = "requests.";
constexpr std::string_view kNativePrefix = "kubernetes.io/";

bool isLowerAlnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool isAlnum(char c) {
    return isLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}

std::string inQuotes(std::string_view text) {
    return "\"" + std::string(text) + "\"";
}

// The qualified-name character rule: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?
std::string qualifiedNamePartProblem(std::string_view name) {
    if (name.empty()) return "the name after '/' is empty";
    if (name.size() > kQualifiedNameMaxLength) {
        return "the name after '/' (" + inQuotes(name) + ", " + std::to_string(name.size()) +
               " characters) must be at most 63 characters";
    }
    for (char c : name) {
        if (!isAlnum(c) && c != '-' && c != '_' && c != '.') {
            return "the name after '/' (" + inQuotes(name) +
                   ") may only contain letters, digits, '-', '_' and '.'";
        }
    }
    if (!isAlnum(name.front()) || !isAlnum(name.back())) {
        return "the name after '/' (" + inQuotes(name) + ") must start and end with a letter or digit";
    }
    return {};
}

// Kubernetes' IsDNS1123Subdomain: at most 253 characters matching
// [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)* — no per-label limit.
std::string dns1123SubdomainProblem(std::string_view text, std::size_t maxLength, bool labelLimit) {
    if (text.empty()) return "is empty";
    if (text.size() > maxLength) {
        return "is " + std::to_string(text.size()) + " characters long; at most " +
               std::to_string(maxLength) + " are allowed";
    }
    std::size_t start = 0;
    while (true) {
        std::size_t dot = text.find('.', start);
        std::string_view label =
            text.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
        if (label.empty()) return "has an empty label (a leading, trailing or doubled '.')";
        for (char c : label) {
            if (c >= 'A' && c <= 'Z') return "must be lower case";
            if (!isLowerAlnum(c) && c != '-') {
                return "contains " + inQuotes(std::string(1, c)) +
                       "; only lower-case letters, digits, '-' and '.' are allowed";
            }
        }
        if (!isLowerAlnum(label.front()) || !isLowerAlnum(label.back())) {
            return "has a label (" + inQuotes(label) + ") that does not start and end with a letter or digit";
        }
        if (labelLimit && label.size() > kDns1123LabelMaxLength) {
            return "has a label (" + inQuotes(label) + ") longer than 63 characters";
        }
        if (dot == std::string_view::npos) break;
        start = dot + 1;
    }
    return {};
}

}  // namespace

std::string instanceHash(std::string_view id, std::string_view nodeName, bool shared) {
    std::string input(id);
    if (!shared) input += nodeName;
    std::uint8_t digest[3] = {};
    // libb2's argument order: (out, in, key, outlen, inlen, keylen). outlen = 3 is a
    // parameter of the hash, not a truncation of a longer digest: that is what Akri uses.
    blake2b(digest, input.data(), nullptr, sizeof digest, input.size(), 0);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hash;
    for (std::uint8_t byte : digest) {
        hash += kHex[byte >> 4];
        hash += kHex[byte & 0x0f];
    }
    return hash;
}

std::string instanceName(std::string_view configuration, std::string_view hash) {
    std::string name(configuration);
    name += '-';
    name += hash;
    return name;
}

std::string slotId(std::string_view instance, int index) {
    // One allocation: a configuration-level list names every slot each time it is sent.
    char digits[16];
    const auto [end, ec] = std::to_chars(std::begin(digits), std::end(digits), index);
    std::string id;
    id.reserve(instance.size() + 1 + static_cast<std::size_t>(end - digits));
    id.append(instance);
    id += '-';
    id.append(digits, end);
    return id;
}

std::string resourceNameProblem(std::string_view resourceName) {
    // IsNativeResource: no '/' or the kubernetes.io/ namespace (also *.kubernetes.io/).
    if (resourceName.find('/') == std::string_view::npos) {
        return "must have the form <domain>/<name> (e.g. akri.sh/my-cameras)";
    }
    if (resourceName.find(kNativePrefix) != std::string_view::npos) {
        return "the kubernetes.io domain is reserved for native resources";
    }
    if (resourceName.starts_with(kRequestsPrefix)) return "must not start with \"requests.\"";

    // IsQualifiedName("requests." + name): exactly one '/', a DNS-1123 subdomain before it.
    std::string forQuota = std::string(kRequestsPrefix) + std::string(resourceName);
    std::string_view qualified = forQuota;
    std::size_t slash = qualified.find('/');
    if (qualified.find('/', slash + 1) != std::string_view::npos) return "must contain exactly one '/'";
    std::string_view domain = resourceName.substr(0, resourceName.find('/'));
    if (domain.empty()) return "the domain before '/' is empty";
    std::string prefixProblem =
        dns1123SubdomainProblem(qualified.substr(0, slash), kDns1123SubdomainMaxLength, /*labelLimit=*/false);
    if (!prefixProblem.empty()) {
        // The prefix is "requests.<domain>"; report it in terms of what the user wrote.
        if (slash > kDns1123SubdomainMaxLength) {
            return "the domain before '/' is " + std::to_string(domain.size()) +
                   " characters long; at most " +
                   std::to_string(kDns1123SubdomainMaxLength - kRequestsPrefix.size()) + " are allowed";
        }
        return "the domain before '/' (" + inQuotes(domain) + ") " +
               dns1123SubdomainProblem(domain, kDns1123SubdomainMaxLength, false);
    }
    return qualifiedNamePartProblem(qualified.substr(slash + 1));
}

std::string domainProblem(std::string_view domain) {
    return dns1123SubdomainProblem(domain, kDns1123SubdomainMaxLength, /*labelLimit=*/true);
}

std::string configurationNameProblem(std::string_view name) {
    if (std::string problem = dns1123SubdomainProblem(name, kDns1123SubdomainMaxLength, /*labelLimit=*/false);
        !problem.empty()) {
        return "is not a Kubernetes object name: it " + problem +
               " (lower-case letters, digits, '-' and '.', each '.'-separated part starting and ending with "
               "a letter or digit)";
    }
    if (name.size() > kMaxConfigurationNameLength) {
        return "has " + std::to_string(name.size()) + " characters; at most " +
               std::to_string(kMaxConfigurationNameLength) + " fit: the instance-level resource <domain>/" +
               std::string(name) + "-<6 hex digits> would have " + std::to_string(name.size() + 7) +
               " characters after '/', and the kubelet allows 63 there (Akri has the same limit)";
    }
    return {};
}

}  // namespace devlet
