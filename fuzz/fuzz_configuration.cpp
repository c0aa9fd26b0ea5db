// Fuzz target: configuration files (Akri Configuration YAML, every handler's
// discoveryDetails), the settings file and Akri's ONVIF credential properties, as text.
// Each input goes through the parsers, with the four handlers the daemon registers, and
// the promises their headers make are checked: every problem has a line inside the file (or 0), a file with
// problems yields no configuration, and what is accepted is usable.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "probes/echo/echo_handler.h"
#include "probes/gpu/gpu_handler.h"
#include "probes/onvif/credentials.h"
#include "probes/onvif/onvif_handler.h"
#include "probes/usb/udev_handler.h"
#include "runtime/configuration.h"
#include "runtime/discovery.h"
#include "runtime/settings.h"

namespace {

const devlet::HandlerRegistry& handlers() {
    static const auto* registry = [] {
        auto* made = new devlet::HandlerRegistry;
        made->add(std::make_unique<devlet::echo::EchoHandler>());
        made->add(std::make_unique<devlet::usb::UdevHandler>());
        made->add(std::make_unique<devlet::gpu::GpuHandler>());
        made->add(std::make_unique<devlet::onvif::OnvifHandler>());
        return made;
    }();
    return *registry;
}

[[noreturn]] void broken(const std::string& what) {
    std::cerr << "broken promise: " << what << "\n";
    std::abort();
}

void checkLines(const std::vector<devlet::ConfigProblem>& problems, int lines, const char* what) {
    for (const auto& problem : problems) {
        // yaml-cpp may point just past the last line (an unterminated flow, end of input).
        if (problem.line < 0 || problem.line > lines + 1)
            broken(std::string(what) + " at line " + std::to_string(problem.line) + " of a file of " +
                   std::to_string(lines) + ": " + problem.str());
        if (problem.message.empty()) broken(std::string(what) + " without a message");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const int lines = 1 + int(std::count(text.begin(), text.end(), '\n'));

    const devlet::ParsedConfigurations parsed =
        devlet::parseConfigurations(text, "fuzz.yaml", handlers(), "akri.sh");
    checkLines(parsed.problems, lines, "configuration problem");
    checkLines(parsed.warnings, lines, "configuration warning");
    if (!parsed.problems.empty() && !parsed.configurations.empty())
        broken("a rejected file still yields configurations");
    std::vector<devlet::Configuration> accepted;
    for (const devlet::Configuration& configuration : parsed.configurations) {
        if (configuration.name.empty() || configuration.capacity < 1)
            broken("an accepted configuration without a name or capacity");
        if (!handlers().find(configuration.handler))
            broken("an accepted configuration of an unknown handler");
        (void)devlet::configurationLevelResource(configuration, "akri.sh");
        (void)devlet::resourceConflict(configuration, accepted, "akri.sh");
        accepted.push_back(configuration);
    }

    // The same text as the values of Akri's credential properties (read from Secrets in
    // cluster mode): whatever they hold, the notes name properties, never a value.
    std::vector<std::string> notes;
    (void)devlet::onvif::CredentialStore::fromAkriProperties({{"device_credential_list", "[\"entries\"]"},
                                                              {"entries", text},
                                                              {"device_credential_ref_list", text},
                                                              {"username_default", text}},
                                                             {}, "nowhere", notes);
    // Only for a structured text: a plain one may be a piece of a note's own wording (the
    // fuzzer finds those), and names taken from inside a list or object are shorter than it.
    if (text.size() > 16 && text.find_first_of("{}[]\":") != std::string::npos) {
        for (const std::string& note : notes) {
            if (note.find(text) != std::string::npos)
                broken("a credential property's value in a note: " + note);
        }
    }

    const devlet::LoadedSettings settings = devlet::parseSettings(text, "devlet.yaml");
    checkLines(settings.problems, lines, "settings problem");
    if (settings.problems.empty() && !devlet::listenProblem(settings.settings.listen).empty())
        broken("accepted settings with an unusable listen address");
    return 0;
}
