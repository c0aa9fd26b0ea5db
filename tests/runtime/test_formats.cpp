// The one base64 codec (what the API, kubeconfigs, JSON Web Tokens and WS-Security write)
// and the one RFC 3339 formatter.

#include <gtest/gtest.h>

#include "runtime/base64.h"
#include "runtime/rfc3339.h"

namespace devlet {
namespace {

TEST(Base64, EncodesWithPadding) {
    EXPECT_EQ(base64Encode(""), "");
    EXPECT_EQ(base64Encode("h"), "aA==");
    EXPECT_EQ(base64Encode("he"), "aGU=");
    EXPECT_EQ(base64Encode("hello"), "aGVsbG8=");
    EXPECT_EQ(base64Encode(std::string("\xff\x00\xfe", 3)), "/wD+");
}

TEST(Base64, DecodesStrictlyButAllowsMissingPaddingAndWhitespace) {
    EXPECT_EQ(base64Decode("aGVsbG8=").value_or("?"), "hello");
    EXPECT_EQ(base64Decode("aGVs\nbG8").value_or("?"), "hello");
    EXPECT_EQ(base64Decode("").value_or("?"), "");
    EXPECT_FALSE(base64Decode("aGV*"));
    EXPECT_FALSE(base64Decode("a"));
    EXPECT_FALSE(base64Decode("aG==VsbG8"));
    EXPECT_FALSE(base64Decode("aGVsbG8-"));  // base64url is not base64
    for (const std::string& text : {std::string(), std::string("x"), std::string("\x01\x02\x03\x04", 4)})
        EXPECT_EQ(base64Decode(base64Encode(text)), text);
}

TEST(Base64, UrlFormIsWhatJsonWebTokensWrite) {
    EXPECT_EQ(base64UrlDecode("_wD-").value_or("?"), std::string("\xff\x00\xfe", 3));
    EXPECT_EQ(base64UrlDecode("eyJhIjoxfQ").value_or("?"), "{\"a\":1}");
    EXPECT_FALSE(base64UrlDecode("eyJhIjoxfQ=="));  // no padding
    EXPECT_FALSE(base64UrlDecode("/wD+"));          // the standard alphabet
}

TEST(Rfc3339, WritesUtcToTheAskedPrecision) {
    using namespace std::chrono;
    const system_clock::time_point t{microseconds(1764083045123456)};
    EXPECT_EQ(rfc3339(t, TimePrecision::Seconds), "2025-11-25T15:04:05Z");
    EXPECT_EQ(rfc3339(t, TimePrecision::Milliseconds), "2025-11-25T15:04:05.123Z");
    EXPECT_EQ(rfc3339(t, TimePrecision::Microseconds), "2025-11-25T15:04:05.123456Z");
    EXPECT_EQ(rfc3339(system_clock::time_point{}, TimePrecision::Milliseconds), "1970-01-01T00:00:00.000Z");
    EXPECT_EQ(rfc3339(system_clock::time_point{milliseconds(-1)}, TimePrecision::Milliseconds),
              "1969-12-31T23:59:59.999Z");
}

}  // namespace
}  // namespace devlet
