// GET /metrics: the engine's counters in the Prometheus text exposition format (version 0.0.4).
#pragma once
#include <string>

#include "server/engine.h"

namespace krafla::server {

std::string metrics_text(const EngineStats& s, const std::string& model_id);

}  // namespace krafla::server
