// Akri udevRules read with udev's grammar and matched with udev's semantics against a
// recorded-shape webcam (video4linux node behind a UVC interface behind a USB device),
// without hardware. Tables where several inputs show one behaviour.

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fnmatch.h>
#include <gtest/gtest.h>

#include "probes/usb/udev_rule.h"

namespace devlet::usb {
namespace {

// A Logitech C920 as udev sees /dev/video0.
UdevObservation webcam() {
    UdevObservation o;
    o.device.devpath = "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/video4linux/video0";
    o.device.subsystem = "video4linux";
    o.device.kernel = "video0";
    o.device.attributes = {{"name", "HD Pro Webcam C920\n"}, {"index", "0"}};
    o.device.tags = {"seat", "uaccess"};
    o.devnode = "/dev/video0";
    o.properties = {{"DEVNAME", "/dev/video0"},
                    {"MAJOR", "81"},
                    {"ID_SERIAL", "046d_HD_Pro_Webcam_C920_A1B2C3D4"},
                    {"ID_V4L_CAPABILITIES", ":capture:"},
                    {"ID_VENDOR", "Great Vendor"}};
    UdevDevice interface {
        "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0", "usb", "1-1:1.0", "uvcvideo",
            {{"bInterfaceClass", "0e"}, {"bInterfaceNumber", "00"}}, {}
    };
    UdevDevice usbDevice{"/devices/pci0000:00/0000:00:14.0/usb1/1-1",
                         "usb",
                         "1-1",
                         "usb",
                         {{"idVendor", "046d"}, {"idProduct", "082d"}, {"serial", "A1B2C3D4  \n"}},
                         {"uaccess"}};
    UdevDevice rootHub{
        "/devices/pci0000:00/0000:00:14.0/usb1", "usb", "usb1", "usb", {{"idVendor", "1d6b"}}, {}};
    UdevDevice controller{
        "/devices/pci0000:00/0000:00:14.0", "pci", "0000:00:14.0", "xhci_hcd", {{"vendor", "0x8086"}}, {}};
    UdevDevice bus{"/devices/pci0000:00", "", "pci0000:00", "", {}, {}};
    o.parents = {interface, usbDevice, rootHub, controller, bus};
    return o;
}

std::optional<UdevRule> parsed(std::string_view text) {
    std::string error;
    std::optional<UdevRule> rule = UdevRule::parse(text, 0, error);
    EXPECT_TRUE(rule) << text << ": " << error;
    return rule;
}

bool matchesWebcam(std::string_view text) {
    std::optional<UdevRule> rule = parsed(text);
    return rule && rule->matches(webcam());
}

std::string rejection(std::string_view text, std::size_t index = 0) {
    std::string error;
    EXPECT_FALSE(UdevRule::parse(text, index, error)) << text;
    return error;
}

bool patternMatches(std::string_view pattern, std::string_view value) {
    SyntaxError error;
    std::optional<UdevPattern> p = UdevPattern::parse(pattern, error);
    EXPECT_TRUE(p) << pattern << ": " << error.reason;
    return p && p->matches(value);
}

struct PatternCase {
    std::string_view pattern;
    std::string_view value;
    bool matches;
};

void expectPatterns(const std::vector<PatternCase>& cases) {
    for (const PatternCase& c : cases) {
        EXPECT_EQ(patternMatches(c.pattern, c.value), c.matches) << c.pattern << " vs " << c.value;
    }
}

// ---- the pattern language ----

TEST(UdevPattern, PlainValueMatchesOnlyItself) {
    expectPatterns({{"video0", "video0", true}, {"video0", "video01", false}, {"video0", "Video0", false}});
}

TEST(UdevPattern, StarMatchesAnyRunIncludingSlashes) {
    expectPatterns({{"video*", "video", true},
                    {"video*", "video10", true},
                    {"*/usb1/*", "/devices/pci0000:00/usb1/1-1", true},
                    {"*.0", "1-1:1.0", true},
                    {"video*", "xvideo", false}});
}

TEST(UdevPattern, QuestionMarkMatchesExactlyOneCharacter) {
    expectPatterns({{"video?", "video0", true}, {"video?", "video", false}, {"video?", "video10", false}});
}

TEST(UdevPattern, BracketMatchesSetsAndRanges) {
    expectPatterns({{"video[0-9]", "video7", true},
                    {"video[0-9]", "videoa", false},
                    {"tty[AU]SB0", "ttyUSB0", true},
                    {"[a-cx]", "x", true},
                    {"[a-]", "-", true}});
}

TEST(UdevPattern, BracketNegatesWithBangOrCaret) {
    expectPatterns({{"video[!0]", "video1", true},
                    {"video[!0]", "video0", false},
                    {"video[^0-4]", "video5", true},
                    {"video[^0-4]", "video3", false}});
}

TEST(UdevPattern, CloseBracketFirstInSetIsLiteral) {
    expectPatterns({{"[]x]", "]", true}, {"[!]]", "]", false}, {"[!]]", "a", true}});
}

TEST(UdevPattern, NamedClassesAreAscii) {
    expectPatterns({{"[[:digit:]]*", "1-1", true},
                    {"[[:xdigit:]][[:xdigit:]]", "0e", true},
                    {"[[:upper:]]", "a", false},
                    {"[[:alpha:][:digit:]]", "7", true}});
}

TEST(UdevPattern, BackslashMakesGlobCharactersLiteral) {
    expectPatterns({{"a\\*b*", "a*bc", true}, {"a\\*b*", "axbc", false}, {"a\\?*", "a?", true}});
}

TEST(UdevPattern, BarSeparatesAlternativesForPlainAndGlobValues) {
    expectPatterns({{"video4linux|sound", "sound", true},
                    {"video4linux|sound", "usb", false},
                    {"video*|vbi*", "vbi0", true},
                    {"video*|vbi*", "radio0", false}});
}

TEST(UdevPattern, EmptyAlternativeMatchesTheEmptyValue) {
    expectPatterns({{"|usb", "", true}, {"usb|", "", true}, {"usb|", "pci", false}});
}

TEST(UdevPattern, EmptyPatternMatchesOnlyTheEmptyValue) {
    expectPatterns({{"", "", true}, {"", "x", false}});
}

TEST(UdevPattern, BackslashInPlainValueIsLiteral) {
    expectPatterns({{"a\\b", "a\\b", true}});
}

// udev calls fnmatch(pattern, value, 0) per alternative; devlet's matcher must agree.
TEST(UdevPattern, GlobsAgreeWithPosixFnmatch) {
    const std::vector<std::string> patterns{
        "*",    "a*b",         "*.c",          "?",       "[abc]", "[!abc]",       "[^a-c]x",
        "[]a]", "[a-]",        "[-a]",         "\\*",     "a\\?b", "[[:digit:]]*", "[[:alpha:][:digit:]]",
        "*/*",  ".*",          "video[0-9]*",  "**a",     "[\\]]", "a[!]]b",       "*a*b*c*",
        "?*",   "[[:punct:]]", "[[:space:]]?", "x[a-c-e]"};
    const std::vector<std::string> values{
        "",  "a",   "ab", "axb", "a.c", "x/y", ".hidden", "video0", "video10", "*", "]",  "-", "b",
        "?", "a?b", "1",  "Z",   "aab", "a]b", "abc",     "xaxbxc", " 1",      "!", "xd", "x-"};
    for (const std::string& pattern : patterns) {
        SyntaxError error;
        std::optional<UdevPattern> p = UdevPattern::parse(pattern, error);
        ASSERT_TRUE(p) << pattern << ": " << error.reason;
        for (const std::string& value : values) {
            EXPECT_EQ(p->matches(value), fnmatch(pattern.c_str(), value.c_str(), 0) == 0)
                << "pattern " << pattern << " value '" << value << "'";
        }
    }
}

struct PatternRejection {
    std::string_view pattern;
    std::size_t offset;
    std::string_view reason;
};

TEST(UdevPattern, BrokenPatternsAreRejectedWithOffsetAndReason) {
    const std::vector<PatternRejection> cases{
        {"video[0-9", 5, "no closing ']'"},
        {"video[9-0]", 6, "the range 9-0 is reversed"},
        {"[[:digits:]]", 1, "unknown character class [:digits:]"},
        {"[[:digit:]", 0, "no closing ']'"},
        {"video*\\", 6, "escapes nothing"},
        {"x[a|b]", 1, "'|' separates alternatives, even inside [...]"},
        {"[[.a.]]", 1, "collating elements"},
    };
    for (const PatternRejection& c : cases) {
        SyntaxError error;
        EXPECT_FALSE(UdevPattern::parse(c.pattern, error)) << c.pattern;
        EXPECT_EQ(error.offset, c.offset) << c.pattern;
        EXPECT_NE(error.reason.find(c.reason), std::string::npos) << c.pattern << ": " << error.reason;
    }
}

// ---- the rule grammar ----

struct KeyCase {
    std::string_view rule;
    UdevKey key;
    std::string_view name;
    bool negated;
    std::string_view value;
    bool parents;
};

TEST(UdevRuleGrammar, ParsesEveryMatchKeyWithBothOperators) {
    const std::vector<KeyCase> cases{
        {R"(ATTR{idVendor}=="046d")", UdevKey::Attr, "idVendor", false, "046d", false},
        {R"(ATTRS{idVendor}!="046d")", UdevKey::Attrs, "idVendor", true, "046d", true},
        {R"(DEVPATH=="/devices/*")", UdevKey::Devpath, "", false, "/devices/*", false},
        {R"(DRIVER!="uvcvideo")", UdevKey::Driver, "", true, "uvcvideo", false},
        {R"(DRIVERS=="uvcvideo")", UdevKey::Drivers, "", false, "uvcvideo", true},
        {R"(ENV{ID_SERIAL}=="?*")", UdevKey::Env, "ID_SERIAL", false, "?*", false},
        {R"(KERNEL=="video[0-9]*")", UdevKey::Kernel, "", false, "video[0-9]*", false},
        {R"(KERNELS!="1-1")", UdevKey::Kernels, "", true, "1-1", true},
        {R"(SUBSYSTEM=="video4linux")", UdevKey::Subsystem, "", false, "video4linux", false},
        {R"(SUBSYSTEMS=="usb")", UdevKey::Subsystems, "", false, "usb", true},
        {R"(TAG!="uaccess")", UdevKey::Tag, "", true, "uaccess", false},
        {R"(TAGS=="uaccess")", UdevKey::Tags, "", false, "uaccess", true},
    };
    for (const KeyCase& c : cases) {
        std::optional<UdevRule> rule = parsed(c.rule);
        ASSERT_TRUE(rule);
        ASSERT_EQ(rule->filters().size(), 1u) << c.rule;
        const UdevFilter& f = rule->filters()[0];
        EXPECT_EQ(f.key, c.key) << c.rule;
        EXPECT_EQ(f.name, c.name) << c.rule;
        EXPECT_EQ(f.negated, c.negated) << c.rule;
        EXPECT_EQ(f.pattern.text(), c.value) << c.rule;
        EXPECT_EQ(f.searchesParents(), c.parents) << c.rule;
        EXPECT_EQ(f.text(), c.rule);
    }
}

TEST(UdevRuleGrammar, SpacesAndTabsAroundKeysOperatorsAndCommasAreAllowed) {
    std::optional<UdevRule> rule = parsed(" \tKERNEL ==  \"video0\" ,\tSUBSYSTEM\t!= \"sound\"  ");
    ASSERT_TRUE(rule);
    ASSERT_EQ(rule->filters().size(), 2u);
    EXPECT_EQ(rule->filters()[1].text(), R"(SUBSYSTEM!="sound")");
}

TEST(UdevRuleGrammar, CommaWithoutSpaceSeparatesFilters) {
    std::optional<UdevRule> rule =
        parsed(R"(KERNEL=="video[0-9]*",SUBSYSTEM=="video4linux", ATTR{idVendor}=="05a9")");
    ASSERT_TRUE(rule);
    EXPECT_EQ(rule->filters().size(), 3u);
}

TEST(UdevRuleGrammar, TrailingCommaIsAllowedAsInUdev) {
    std::optional<UdevRule> rule = parsed(R"(KERNEL=="video0", )");
    ASSERT_TRUE(rule);
    EXPECT_EQ(rule->filters().size(), 1u);
}

TEST(UdevRuleGrammar, BackslashQuoteInValueIsAQuote) {
    std::optional<UdevRule> rule = parsed(R"(ENV{ID_MODEL}=="say \"hi\"")");
    ASSERT_TRUE(rule);
    EXPECT_EQ(rule->filters()[0].pattern.text(), "say \"hi\"");
}

TEST(UdevRuleGrammar, NameInBracesMayHoldSpacesAndSlashes) {
    std::optional<UdevRule> rule = parsed(R"(ENV{a name}=="x", ATTR{device/vendor}=="0x8086")");
    ASSERT_TRUE(rule);
    EXPECT_EQ(rule->filters()[0].name, "a name");
    EXPECT_EQ(rule->filters()[1].name, "device/vendor");
}

TEST(UdevRuleGrammar, EmptyValueIsAllowed) {
    std::optional<UdevRule> rule = parsed(R"(ENV{MAJOR}!="")");
    ASSERT_TRUE(rule);
    EXPECT_EQ(rule->filters()[0].pattern.text(), "");
}

struct Rejection {
    std::string_view rule;
    std::size_t position;  // 1-based, as the message says
    std::string_view reason;
};

TEST(UdevRuleGrammar, RejectionsNameRuleIndexPositionAndReason) {
    const std::vector<Rejection> cases{
        {"", 1, "the rule is empty"},
        {"   ", 1, "the rule is empty"},
        {R"(KERNEL="video0")", 7, "\"=\" assigns a value in udev rules; a discovery rule only matches"},
        {R"(TAG+="uaccess")", 4, "\"+=\" adds to a value"},
        {R"(TAG-="uaccess")", 4, "\"-=\" removes from a value"},
        {R"(TAG:="uaccess")", 4, "\":=\" assigns a value"},
        {R"(KERNEL=="video0", OWNER="root")", 19, "OWNER is a udev assignment key"},
        {R"(MODE="0666")", 1, "MODE is a udev assignment key"},
        {R"(RUN{program}+="/bin/true")", 1, "RUN is a udev assignment key"},
        {R"(ACTION=="add")", 1,
         "ACTION is a udev match key that devlet does not support: devlet matches devices"},
        {R"(NAME=="disk")", 1, "NAME is a udev match key that devlet does not support: use KERNEL"},
        {R"(SYMLINK+="disk/by-id/x")", 1,
         "SYMLINK+= assigns in udev rules: a discovery rule only selects devices"},
        {R"(SECLABEL{selinux}="x")", 1, "SECLABEL is a udev assignment key"},
        {R"(TEST{0644}=="/dev/x")", 1, "TEST is a udev match key that devlet does not support"},
        {R"(PROGRAM=="/bin/true")", 1, "PROGRAM is a udev match key that devlet does not support"},
        {R"(KERNAL=="video0")", 1, "unknown key \"KERNAL\"; did you mean \"KERNEL\"?"},
        {R"(kernel=="video0")", 1, "unknown key \"kernel\"; did you mean \"KERNEL\"?"},
        {R"(COLOUR=="red")", 1, "unknown key \"COLOUR\" (match keys: ATTR, ATTRS,"},
        {R"(KERNEL=="video0)", 9, "the value opened here has no closing '\"'"},
        {R"(KERNEL==video0)", 9, "expected a value in double quotes after KERNEL=="},
        {R"(KERNEL=='video0')", 9, "expected a value in double quotes"},
        {R"(ENV{X}==i"abc")", 9, "i\"...\" values are not supported"},
        {R"(ATTR=="046d")", 1, "ATTR needs a name in braces, as in ATTR{idVendor}"},
        {R"(ENV{}=="x")", 1, "ENV needs a name in braces, as in ENV{ID_SERIAL}"},
        {R"(ATTRS{idVendor=="046d")", 6, "'{' has no closing '}'"},
        {R"(KERNEL{x}=="video0")", 1, "KERNEL takes no {...} name"},
        {R"(ATTR{[dmi/id]sys_vendor}=="x")", 1, "[subsystem/sysname]attribute} form is not supported"},
        {R"(KERNEL "video0")", 8, "expected \"==\" or \"!=\" after KERNEL"},
        {R"(KERNEL=="video[0-9")", 15, "'[' opens a character class with no closing ']'"},
        {R"(KERNEL=="video[9-0]")", 16, "the range 9-0 is reversed"},
        {R"(KERNEL=="video0" SUBSYSTEM=="video4linux")", 18, "expected ',' between filters"},
        {R"(KERNEL=="video0",, SUBSYSTEM=="x")", 18, "empty filter between commas"},
        {R"(=="x")", 1, "expected a key such as KERNEL or ATTR{name}, found '='"},
    };
    for (const Rejection& c : cases) {
        const std::string error = rejection(c.rule, 3);
        const std::string head =
            "udevRules[3] '" + std::string(c.rule) + "': position " + std::to_string(c.position) + ": ";
        EXPECT_EQ(error.substr(0, head.size()), head) << error;
        EXPECT_NE(error.find(c.reason), std::string::npos) << error;
    }
}

// ---- matching, key by key ----

struct MatchCase {
    std::string_view rule;
    bool matches;
};

void expectWebcam(const std::vector<MatchCase>& cases) {
    for (const MatchCase& c : cases) EXPECT_EQ(matchesWebcam(c.rule), c.matches) << c.rule;
}

TEST(UdevRuleMatch, DeviceKeysLookAtTheDeviceOnly) {
    expectWebcam({
        {R"(SUBSYSTEM=="video4linux")", true},
        {R"(SUBSYSTEM!="video4linux")", false},
        {R"(SUBSYSTEM=="usb")", false},
        {R"(KERNEL=="video0")", true},
        {R"(KERNEL!="video0")", false},
        {R"(KERNEL=="1-1")", false},
        {R"(DEVPATH=="*/video4linux/video0")", true},
        {R"(DEVPATH!="/devices/pci0000:00/*")", false},
        {R"(DRIVER=="uvcvideo")", false},
    });
}

TEST(UdevRuleMatch, DriverOfADeviceWithoutOneIsEmpty) {
    expectWebcam({{R"(DRIVER=="")", true}, {R"(DRIVER!="uvcvideo")", true}, {R"(DRIVER=="?*")", false}});
}

TEST(UdevRuleMatch, AttrComparesTheDevicesAttribute) {
    expectWebcam({{R"(ATTR{index}=="0")", true},
                  {R"(ATTR{index}!="0")", false},
                  {R"(ATTR{index}=="[1-9]")", false},
                  {R"(ATTR{idVendor}=="046d")", false}});
}

TEST(UdevRuleMatch, MissingAttributeFailsBothOperatorsAsInUdev) {
    expectWebcam(
        {{R"(ATTR{nosuch}=="x")", false}, {R"(ATTR{nosuch}!="x")", false}, {R"(ATTR{nosuch}=="")", false}});
}

TEST(UdevRuleMatch, AttributeTrailingWhitespaceIsStripped) {
    expectWebcam({{R"(ATTR{name}=="HD Pro Webcam C920")", true},
                  {R"(ATTRS{serial}=="A1B2C3D4")", true},
                  {R"(ATTR{name}=="*C920")", true}});
}

TEST(UdevRuleMatch, PatternEndingInWhitespaceComparesTheRawAttribute) {
    expectWebcam({{"ATTRS{serial}==\"A1B2C3D4  \n\"", true}, {"ATTRS{serial}==\"A1B2C3D4 \"", false}});
}

TEST(UdevRuleMatch, EnvComparesUdevProperties) {
    expectWebcam({{R"(ENV{ID_V4L_CAPABILITIES}==":capture:")", true},
                  {R"(ENV{ID_VENDOR}=="Great Vendor")", true},
                  {R"(ENV{ID_SERIAL}=="046d_*")", true},
                  {R"(ENV{ID_SERIAL}!="046d_*")", false}});
}

TEST(UdevRuleMatch, UnsetPropertyComparesAsEmptyAsInUdev) {
    expectWebcam(
        {{R"(ENV{NOSUCH}=="")", true}, {R"(ENV{NOSUCH}!="x")", true}, {R"(ENV{NOSUCH}=="?*")", false}});
}

TEST(UdevRuleMatch, TagMatchesWhenAnyTagMatches) {
    expectWebcam({{R"(TAG=="uaccess")", true},
                  {R"(TAG=="sea*")", true},
                  {R"(TAG=="systemd")", false},
                  {R"(TAG!="uaccess")", false},
                  {R"(TAG!="systemd")", true}});
}

TEST(UdevRuleMatch, FiltersOfOneRuleAreAnded) {
    expectWebcam({{R"(SUBSYSTEM=="video4linux", KERNEL=="video0")", true},
                  {R"(SUBSYSTEM=="video4linux", KERNEL=="video1")", false}});
}

TEST(UdevRuleMatch, AlternativesWorkInEveryKey) {
    expectWebcam({{R"(SUBSYSTEM=="sound|video4linux")", true},
                  {R"(KERNEL=="vbi*|video*")", true},
                  {R"(ATTRS{idVendor}=="1234|046d")", true},
                  {R"(ENV{ID_V4L_CAPABILITIES}=="|:capture:")", true},
                  {R"(SUBSYSTEM!="sound|video4linux")", false}});
}

// ---- the ...S keys ----

TEST(UdevRuleParents, ParentKeysSearchTheDeviceAndItsParents) {
    expectWebcam({
        {R"(SUBSYSTEMS=="video4linux")", true},
        {R"(SUBSYSTEMS=="pci")", true},
        {R"(SUBSYSTEMS=="sound")", false},
        {R"(KERNELS=="1-1")", true},
        {R"(DRIVERS=="uvcvideo")", true},
        {R"(DRIVERS=="xhci_hcd")", true},
        {R"(ATTRS{idVendor}=="046d")", true},
        {R"(ATTRS{idProduct}=="0825")", false},
        {R"(TAGS=="uaccess")", true},
        {R"(TAGS=="systemd")", false},
    });
}

TEST(UdevRuleParents, AllParentFiltersMustHoldOnTheSameDevice) {
    // idVendor is on the USB device 1-1; uvcvideo drives its interface 1-1:1.0.
    expectWebcam({{R"(ATTRS{idVendor}=="046d", KERNELS=="1-1")", true},
                  {R"(ATTRS{idVendor}=="046d", ATTRS{idProduct}=="082d", DRIVERS=="usb")", true},
                  {R"(ATTRS{idVendor}=="046d", DRIVERS=="uvcvideo")", false},
                  {R"(SUBSYSTEMS=="pci", KERNELS=="1-1")", false}});
}

TEST(UdevRuleParents, NearestDeviceWhereAllHoldIsChosen) {
    // The root hub also has idVendor; the nearest match is the camera's USB device.
    std::optional<UdevRule> rule = parsed(R"(SUBSYSTEMS=="usb", ATTRS{idVendor}=="?*")");
    ASSERT_TRUE(rule);
    const UdevMatch match = rule->explain(webcam());
    EXPECT_TRUE(match.matched);
    EXPECT_NE(match.explanation.find("\"/devices/pci0000:00/0000:00:14.0/usb1/1-1\""), std::string::npos)
        << match.explanation;
}

TEST(UdevRuleParents, NotEqualHoldsOnTheFirstDeviceThatDiffersAsInUdev) {
    // udev applies != per device of the chain: some device (the same one for all ...S
    // filters) must differ. Akri instead requires that no device in the chain matches.
    expectWebcam({{R"(SUBSYSTEMS!="usb")", true},
                  {R"(KERNELS!="video0")", true},
                  {R"(ATTRS{idVendor}!="046d")", true},
                  {R"(SUBSYSTEMS!="usb", KERNELS=="1-1")", false}});
}

TEST(UdevRuleParents, AttributeMissingOnEveryDeviceFails) {
    UdevObservation o = webcam();
    o.parents[1].attributes.erase("idVendor");
    o.parents[2].attributes.erase("idVendor");
    std::optional<UdevRule> rule = parsed(R"(ATTRS{idVendor}=="?*")");
    ASSERT_TRUE(rule);
    EXPECT_FALSE(rule->matches(o));
}

// ---- rule lists ----

TEST(UdevRuleList, AnyMatchingRuleSelectsTheDevice) {
    std::vector<std::string> problems;
    const std::vector<UdevRule> rules = parseUdevRules(
        {R"(SUBSYSTEM=="sound")", R"(KERNEL=="video0")", R"(SUBSYSTEM=="video4linux")"}, problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(firstMatchingRule(rules, webcam()), std::optional<std::size_t>(1));
}

TEST(UdevRuleList, NoMatchingRuleSelectsNothing) {
    std::vector<std::string> problems;
    const std::vector<UdevRule> rules =
        parseUdevRules({R"(SUBSYSTEM=="sound")", R"(KERNEL=="hidraw*")"}, problems);
    EXPECT_EQ(firstMatchingRule(rules, webcam()), std::nullopt);
}

TEST(UdevRuleList, EachBrokenEntryIsReportedWithItsIndex) {
    std::vector<std::string> problems;
    const std::vector<UdevRule> rules =
        parseUdevRules({R"(KERNEL=="video0")", R"(MODE="0666")", R"(KERNAL=="x")"}, problems);
    EXPECT_EQ(rules.size(), 1u);
    ASSERT_EQ(problems.size(), 2u);
    EXPECT_EQ(problems[0].rfind("udevRules[1] 'MODE=\"0666\"'", 0), 0u) << problems[0];
    EXPECT_EQ(problems[1].rfind("udevRules[2] ", 0), 0u) << problems[1];
}

// ---- explanations for `devlet probe` ----

TEST(UdevRuleExplain, NonMatchNamesTheFirstFailingFilterAndWhatTheDeviceHad) {
    std::optional<UdevRule> rule = parsed(R"(SUBSYSTEM=="video4linux", KERNEL=="video1", ATTR{x}=="y")");
    ASSERT_TRUE(rule);
    const UdevMatch match = rule->explain(webcam());
    EXPECT_FALSE(match.matched);
    EXPECT_EQ(match.explanation, R"(KERNEL=="video1" does not hold: KERNEL is "video0")");
}

TEST(UdevRuleExplain, MissingAttributeIsSaid) {
    std::optional<UdevRule> rule = parsed(R"(ATTR{idVendor}=="046d")");
    ASSERT_TRUE(rule);
    EXPECT_EQ(rule->explain(webcam()).explanation,
              R"(ATTR{idVendor}=="046d" does not hold: there is no attribute idVendor)");
}

TEST(UdevRuleExplain, ParentFailureListsEveryDeviceOfTheChain) {
    std::optional<UdevRule> rule = parsed(R"(ATTRS{idVendor}=="046d", DRIVERS=="uvcvideo")");
    ASSERT_TRUE(rule);
    const UdevMatch match = rule->explain(webcam());
    EXPECT_FALSE(match.matched);
    EXPECT_NE(match.explanation.find(R"(satisfies all of ATTRS{idVendor}=="046d", DRIVERS=="uvcvideo")"),
              std::string::npos)
        << match.explanation;
    EXPECT_NE(
        match.explanation.find(
            R"("/devices/pci0000:00/0000:00:14.0/usb1/1-1": DRIVERS=="uvcvideo" fails, DRIVER is "usb")"),
        std::string::npos)
        << match.explanation;
}

TEST(UdevRuleExplain, MatchOnTheDeviceItselfSaysSo) {
    std::optional<UdevRule> rule = parsed(R"(KERNEL=="video0", SUBSYSTEMS=="video4linux")");
    ASSERT_TRUE(rule);
    const UdevMatch match = rule->explain(webcam());
    EXPECT_TRUE(match.matched);
    EXPECT_EQ(match.explanation, "matches; the parent filters hold on the device itself");
}

// ---- Akri's own rules ----

// akri:test/example.rules: every rule Akri accepts, devlet accepts.
TEST(AkriCompatibility, AkrisExampleRulesParse) {
    for (std::string_view text : {
             R"(SUBSYSTEM=="video4linux")",
             R"(KERNEL=="video*", ENV{ID_SERIAL}=="?*")",
             R"(ENV{ID_PATH}=="?*", KERNEL=="video*|vbi*", DRIVER=="some driver")",
             R"(TAG=="uaccess",ENV{MAJOR}!="")",
             R"(KERNEL=="video[0-9]", DEVPATH!="/sys/path/to/device")",
             R"(ATTR{idProduct}=="1900", ENV{ID_MM_ERICSSON_MBM}=="1")",
             R"(ATTR{idVendor}=="0bdd", ENV{a name}=="Keyboard that has a mouse")",
             R"(KERNEL=="video[0-9]*", ENV{ID_V4L_CAPABILITIES}==":capture:")",
             R"(SUBSYSTEMS=="pci")",
             R"(ATTRS{idVendor}=="0bdd", DRIVERS!="a driver")",
             R"(TAGS=="uaccess")",
             R"(KERNELS=="card[0-9]*")",
         }) {
        EXPECT_TRUE(parsed(text)) << text;
    }
}

// akri:test/example-unsupported.rules: every rule Akri rejects, devlet rejects.
TEST(AkriCompatibility, AkrisUnsupportedRulesAreRejected) {
    for (std::string_view text : {
             R"(RUN{builtin}+="uaccess")",
             R"(LABEL="some label")",
             R"(GOTO="end")",
             R"(IMPORT{program}="v4l_id $devnode")",
             R"(OPTIONS="some options")",
             R"(OWNER="owner")",
             R"(GROUP="group")",
             R"(MODE="mode")",
             R"(WAIT_FOR="queue/read_q")",
             R"(ACTION=="this action")",
             R"(NAME=="another_disk")",
             R"(SYMLINK+="v4l/by-id/$env{ID_BUS}-$env{ID_SERIAL}-video-index$attr{index}")",
             R"(TEST{key}=="value)",
             R"(PROGRAM=="some program")",
             R"(RESULT=="some result")",
             R"(CONST{key}=="value")",
             R"(SECLABEL{key}=="value)",
             R"(SYSCTL{key}=="value")",
             R"(TAG-="uaccess")",
             R"(TAG+="uaccess")",
             R"(TAG="uaccess")",
             R"(TAG:="uaccess")",
         }) {
        EXPECT_FALSE(rejection(text).empty()) << text;
    }
}

// The configuration Akri's docs show for cameras matches a camera as Akri users expect.
TEST(AkriCompatibility, DocumentedCameraRulesMatchTheWebcam) {
    expectWebcam({
        {R"(SUBSYSTEM=="video4linux", ENV{ID_V4L_CAPABILITIES}==":capture:")", true},
        {R"(KERNEL=="video[0-9]*")", true},
        {R"(KERNEL=="video*", ENV{ID_SERIAL}=="?*")", true},
        {R"(KERNEL=="video[0-9]*", ENV{ID_VENDOR}=="Great Vendor")", true},
        {R"(TAG=="uaccess",ENV{MAJOR}!="")", true},
        {R"(SUBSYSTEMS=="usb", ATTRS{idVendor}=="046d")", true},
        {R"(SUBSYSTEM=="sound")", false},
    });
}

// Akri matches KERNEL!=, DEVPATH!=, DRIVER and every ...S key as whole-string regexes;
// devlet reads them as udev patterns, the same language as KERNEL==.
TEST(AkriCompatibility, RegexStyleValuesAreUdevPatterns) {
    expectWebcam({
        // Akri (regex): "uvc" then any characters. devlet: literally "uvc." then anything.
        {R"(DRIVERS=="uvc.*")", false},
        // Akri (regex): "uv" then any number of "c", so "uvcvideo" fails. devlet: a prefix.
        {R"(DRIVERS=="uvc*")", true},
        // Akri (regex): video followed by one or more digits. devlet: '+' is literal.
        {R"(KERNEL!="video[0-9]+")", true},
    });
}

// Akri hands KERNEL== to libudev, which does not split at '|': "video*|vbi*" matches no
// device there. devlet, like udev rules, reads it as two alternatives.
TEST(AkriCompatibility, BarIsAnAlternativeInEveryKey) {
    expectWebcam({{R"(KERNEL=="video*|vbi*")", true}});
}

// Akri evaluates each ...S filter on its own; udev and devlet need one device for all.
TEST(AkriCompatibility, ParentFiltersOnDifferentDevicesDoNotMatch) {
    expectWebcam({{R"(ATTRS{idVendor}=="046d", DRIVERS=="uvcvideo")", false}});
}

// Akri's DEVPATH== is an exact sysfs path; a plain value still is one in devlet.
TEST(AkriCompatibility, PlainDevpathIsExact) {
    expectWebcam(
        {{R"(DEVPATH=="/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/video4linux/video0")", true},
         {R"(DEVPATH=="/devices/pci0000:00/0000:00:14.0/usb1/1-1")", false}});
}

// ---- what an adapter may skip reading ----

TEST(UdevRuleSubsystems, EveryRuleNamingASubsystemGivesTheFilter) {
    struct Case {
        std::vector<std::string> rules;
        std::optional<std::set<std::string>> subsystems;
    };
    const std::vector<Case> cases = {
        {{R"(SUBSYSTEM=="video4linux")"}, std::set<std::string>{"video4linux"}},
        {{R"(SUBSYSTEM=="tty|hidraw", ATTRS{idVendor}=="0403")",
          R"(KERNEL=="video*", SUBSYSTEM=="video4linux")"},
         std::set<std::string>{"tty", "hidraw", "video4linux"}},
        // A rule without one matches any subsystem: nothing can be filtered.
        {{R"(SUBSYSTEM=="tty")", R"(KERNEL=="video*")"}, std::nullopt},
        {{R"(SUBSYSTEMS=="usb")"}, std::nullopt},
        {{R"(SUBSYSTEM!="tty")"}, std::nullopt},
        {{R"(SUBSYSTEM=="video*")"}, std::nullopt},
        {{R"(SUBSYSTEM=="tty|")"}, std::nullopt},  // the empty alternative: devices without one
        {{}, std::nullopt},
    };
    for (const Case& c : cases) {
        std::vector<std::string> problems;
        const std::vector<UdevRule> rules = parseUdevRules(c.rules, problems);
        ASSERT_TRUE(problems.empty());
        EXPECT_EQ(ruleSubsystems(rules), c.subsystems) << (c.rules.empty() ? "" : c.rules.front());
    }
}

TEST(UdevRulePrefix, APrefixThatFailsMeansTheRuleFails) {
    // Filters are read in order: an adapter stops reading at the first prefix that fails.
    const auto rule = parsed(R"(SUBSYSTEM=="tty", ATTR{name}=="HD Pro*", ATTRS{idVendor}=="046d")");
    ASSERT_TRUE(rule);
    EXPECT_TRUE(rule->prefixMatches(webcam(), 0));
    EXPECT_FALSE(rule->prefixMatches(webcam(), 1));
    EXPECT_FALSE(rule->prefixMatches(webcam(), 3));

    const auto later = parsed(R"(SUBSYSTEM=="video4linux", ATTR{name}=="HD Pro*", ATTRS{idVendor}=="0403")");
    ASSERT_TRUE(later);
    EXPECT_TRUE(later->prefixMatches(webcam(), 1));
    EXPECT_TRUE(later->prefixMatches(webcam(), 2));
    EXPECT_FALSE(later->prefixMatches(webcam(), 3));
    EXPECT_FALSE(later->matches(webcam()));
}

TEST(UdevRulePrefix, AnAttributeNotReadYetIsOnlyNeededByTheFilterThatNamesIt) {
    UdevObservation unread = webcam();
    unread.device.attributes.clear();  // nothing read of the device itself yet
    const auto rule = parsed(R"(SUBSYSTEM=="video4linux", ATTR{name}=="HD Pro*")");
    ASSERT_TRUE(rule);
    EXPECT_TRUE(rule->prefixMatches(unread, 1));
    EXPECT_FALSE(rule->prefixMatches(unread, 2));
    EXPECT_TRUE(rule->prefixMatches(webcam(), 2));
}

}  // namespace
}  // namespace devlet::usb
