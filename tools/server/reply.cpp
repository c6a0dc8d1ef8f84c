#include "server/reply.h"

namespace krafla::server {

std::string client_finish(const RunResult& r) {
  return r.finish_reason == "timeout" ? "length" : r.finish_reason;
}

ChoiceBuilder::ChoiceBuilder(const CompletionRequest& r, const Tokenizer& tok,
                             const std::string& chat_name, const std::string& reply_prefix,
                             int index)
    : r_(r), tok_(tok), index_(index), text_(reply_prefix), sent_(reply_prefix.size()) {
  if (!r.tools_json.empty()) tmpl_ = &chat_template(chat_name);
}

Json ChoiceBuilder::logprobs_json(const std::vector<TokenLogprob>& lps) {
  if (!r_.logprobs) return nullptr;
  if (r_.endpoint == Endpoint::kChat) return chat_logprobs_json(tok_, lps);
  return text_logprobs_json(tok_, lps, token_bytes_);
}

size_t ChoiceBuilder::safe_end() const {
  if (!tmpl_) return text_.size();
  const std::string_view open = tmpl_->tool_call_open();
  size_t end = text_.size();
  if (tmpl_->tool_format == ToolFormat::kJsonReply) {  // a call is the whole reply
    const size_t first = text_.find_first_not_of(" \t\r\n");
    end = first == std::string::npos || text_[first] == open[0] ? 0 : text_.size();
  } else if (const size_t at = text_.find(open); at != std::string::npos) {
    end = at;
  } else {  // a tail that may be the start of the opening tag
    for (size_t k = std::min(open.size() - 1, text_.size()); k > 0; --k)
      if (text_.compare(text_.size() - k, k, open.substr(0, k)) == 0) {
        end = text_.size() - k;
        break;
      }
  }
  return std::max(end, sent_);
}

std::optional<Choice> ChoiceBuilder::push(const Piece& p) {
  text_ += p.text;
  if (!r_.stream) {
    lps_.insert(lps_.end(), p.logprobs.begin(), p.logprobs.end());
    return std::nullopt;
  }
  Choice c;
  c.index = index_;
  const size_t end = safe_end();
  c.text = text_.substr(sent_, end - sent_);
  sent_ = end;
  if (!p.logprobs.empty()) c.logprobs = logprobs_json(p.logprobs);
  if (c.text.empty() && c.logprobs.is_null()) return std::nullopt;
  return c;
}

Choice ChoiceBuilder::finish(const RunResult& rr) {
  const bool stream = r_.stream;
  Choice c;
  c.index = index_;
  c.finish = client_finish(rr);
  std::string content = text_;
  if (tmpl_) {
    ToolCallReply reply = parse_tool_calls(tmpl_->name, text_, r_.tools_json);
    if (!reply.calls.empty()) {
      for (ToolCall& call : reply.calls) call.id = new_tool_call_id();
      c.tool_calls = std::move(reply.calls);
      c.finish = "tool_calls";
      content = reply.content;
    }
  }
  if (stream) {  // what was held back, unless it was the calls' markup
    c.text = c.tool_calls.empty() ? text_.substr(sent_) : "";
    return c;
  }
  c.text = content;
  c.logprobs = logprobs_json(lps_);
  return c;
}

}  // namespace krafla::server
