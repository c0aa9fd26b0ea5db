#pragma once
// The page at GET /: one self-contained HTML document (inline style and script, no
// external assets) that renders /api/v1/status and polls it to stay current.

#include <string_view>

namespace devlet::status {

std::string_view statusPage();

}  // namespace devlet::status
