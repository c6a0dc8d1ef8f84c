// One choice of a reply, built from the engine's pieces as they arrive: the text, the log
// probabilities in the endpoint's shape and, when the request gave tools, the tool calls parsed
// from the finished text. While streaming with tools, text is held back from where a tool call
// may start (the template's tool_call_open()), so a client never sees call markup as content.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "krafla/tokenizer.h"
#include "server/engine.h"
#include "server/openai.h"

namespace krafla::server {

class ChoiceBuilder {
 public:
  // `chat_name` is the template the prompt was rendered with ("" for completions);
  // `reply_prefix` the markup the prompt wrote for the reply (Prepared::reply_prefix).
  ChoiceBuilder(const CompletionRequest& r, const Tokenizer& tok, const std::string& chat_name,
                const std::string& reply_prefix, int index);

  // Streamed requests: the choice of the stream chunk for this piece, or nullopt when there is
  // nothing to send. Whole ones: gathers the piece, always nullopt.
  std::optional<Choice> push(const Piece& p);
  // After the run: for a stream, the last chunk's choice (text held back or the tool calls,
  // and the finish reason); else the whole choice.
  Choice finish(const RunResult& rr);

 private:
  size_t safe_end() const;  // how much of text_ may be streamed
  Json logprobs_json(const std::vector<TokenLogprob>& lps);

  const CompletionRequest& r_;
  const Tokenizer& tok_;
  const ChatTemplate* tmpl_ = nullptr;  // with tools only
  int index_;
  std::string text_;               // the reply so far
  size_t sent_ = 0;                // bytes of text_ streamed
  std::vector<TokenLogprob> lps_;  // all of them (whole replies)
  size_t token_bytes_ = 0;         // completions' text_offset of the next token
};

// What a client sees as finish_reason: OpenAI has none for a timeout, which cuts the reply
// short as a token limit does.
std::string client_finish(const RunResult& r);

}  // namespace krafla::server
