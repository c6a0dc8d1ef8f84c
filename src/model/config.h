// The model config of docs/format.md: read from a file's metadata and checked against what
// this build can run.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "krafla/model.h"

namespace krafla {

// Reads meta["config"] and validates it; throws krafla::Error naming `path` and the field.
ModelConfig parse_config(const nlohmann::json& meta, const std::string& path);

}  // namespace krafla
