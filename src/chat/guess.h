// Which of the chat templates of krafla/chat.h renders a model's Jinja chat_template: the
// rules of tools/convert/tokenizer.py's guess_chat_template (a .mlb records the name the
// converter chose; a GGUF file carries only the template text, tokenizer.chat_template).
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace krafla {

// The template text decides first; without one the vocabulary does (Llama 3's header tokens,
// Llama 2's 32000-piece SentencePiece vocabulary). "" when no renderer fits.
std::string guess_chat_template(std::string_view tmpl,
                                const std::function<bool(std::string_view)>& has_token,
                                size_t n_tokens);

}  // namespace krafla
