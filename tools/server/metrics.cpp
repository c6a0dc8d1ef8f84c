#include "server/metrics.h"

#include <fmt/format.h>

namespace krafla::server {

namespace {
// One metric: its HELP and TYPE lines, then the sample, labelled with the model.
void metric(std::string& out, const char* name, const char* type, const char* help, double value,
            const std::string& labels) {
  out += fmt::format("# HELP krafla_{0} {1}\n# TYPE krafla_{0} {2}\nkrafla_{0}{{{3}}} {4}\n", name,
                     help, type, labels, value);
}

std::string label_value(const std::string& s) {  // backslash, quote and newline escaped
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}
}  // namespace

std::string metrics_text(const EngineStats& s, const std::string& model_id) {
  const std::string l = fmt::format("model=\"{}\"", label_value(model_id));
  auto rate = [](uint64_t tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  std::string out;
  metric(out, "requests_total", "counter", "Requests that got a slot.", double(s.requests), l);
  metric(out, "prompt_tokens_total", "counter", "Prompt tokens of those requests.",
         double(s.prompt_tokens), l);
  metric(out, "cached_prompt_tokens_total", "counter",
         "Prompt tokens reused from a slot's KV cache (not computed).", double(s.cached_tokens), l);
  metric(out, "generated_tokens_total", "counter", "Tokens generated.", double(s.generated_tokens),
         l);
  metric(out, "forward_steps_total", "counter", "Forward passes of the scheduler.", double(s.steps),
         l);
  metric(out, "prefill_seconds_total", "counter", "Seconds in steps that held prompt tokens.",
         s.prefill_seconds, l);
  metric(out, "decode_seconds_total", "counter", "Seconds in steps of generated tokens only.",
         s.decode_seconds, l);
  metric(out, "drafted_tokens_total", "counter", "Tokens drafted by --lookup or --draft.",
         double(s.drafted_tokens), l);
  metric(out, "accepted_tokens_total", "counter", "Drafted tokens kept (--lookup, --draft).",
         double(s.accepted_tokens), l);
  metric(out, "requests_queued", "gauge", "Requests waiting for a free slot.", s.queued, l);
  metric(out, "slots_busy", "gauge", "Slots serving a request.", s.active, l);
  metric(out, "slots", "gauge", "Slots (ml_server --parallel).", s.slots, l);
  metric(out, "prefill_tokens_per_second", "gauge",
         "Prompt tokens per second of prefill step time, since the start.",
         rate(s.prefill_step_tokens, s.prefill_seconds), l);
  metric(out, "decode_tokens_per_second", "gauge",
         "Generated tokens per second of decode-only step time, since the start.",
         rate(s.decode_step_tokens, s.decode_seconds), l);
  return out;
}

}  // namespace krafla::server
