#pragma once
// Akri-compatible names: instance hashes, instance names, resource names, slot ids.

#include <string>
#include <string_view>

namespace devlet {

// 6 lower-case hex digits of BLAKE2b with a 3-byte digest (outlen = 3, not a
// truncation) over id + nodeName, or id alone for shared devices — as Akri computes it.
std::string instanceHash(std::string_view id, std::string_view nodeName, bool shared);

// "<configuration>-<hash>"
std::string instanceName(std::string_view configuration, std::string_view hash);

// "<instance>-<k>": the same id in the instance's and the configuration's resource.
std::string slotId(std::string_view instance, int index);

// The kubelet's IsExtendedResourceName: not native, not "requests.", and
// "requests." + name is a valid qualified name. Returns why not, or empty.
std::string resourceNameProblem(std::string_view resourceName);

// A DNS-1123 subdomain (the resource domain); returns why not, or empty.
std::string domainProblem(std::string_view domain);

}  // namespace devlet
