#pragma once
// Akri-compatible names: instance hashes, instance names, resource names, slot ids.

#include <cstddef>
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

// The longest configuration name Akri's resources allow: the instance-level resource
// "<domain>/<name>-<hash>" has at most 63 characters after the '/' (the kubelet's rule for
// extended resource names), so the name has at most 63 - 7. Akri does not check it itself;
// its device plugins for longer names are refused by the kubelet.
inline constexpr std::size_t kMaxConfigurationNameLength = 56;

// The device id length the device-plugin API's comment gives ("max 63 characters"). The
// kubelet is not known to enforce it; Akri's slot ids are not kept within it either.
inline constexpr std::size_t kDocumentedDeviceIdLength = 63;

// A configuration name as Kubernetes and Akri accept it: an object name (DNS-1123
// subdomain: lower-case letters, digits, '-' and '.') of at most
// kMaxConfigurationNameLength characters. Returns why not ("is ..."), or empty.
std::string configurationNameProblem(std::string_view name);

}  // namespace devlet
