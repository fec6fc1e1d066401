// Chat templates of instruct checkpoints, applied token for token as transformers'
// apply_chat_template(messages, add_generation_prompt=True) does: the rendered text is encoded
// with special tokens parsed and no post-processor template (add_special_tokens=False).
//
// Known templates are recognised by the SHA-256 of tokenizer_config.json's `chat_template` text:
// Qwen2-Instruct's ChatML and Meta Llama 3 Instruct's (their Jinja text is in
// tools/golden/make_chat_template_golden.py, which makes the golden ids). Any other template is
// refused with an error naming it (its hash and first line): crl renders no template it has not
// been checked against. Base models use `prompt_format: raw` instead (raw_prompt_ids).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "policy/tokenizer.h"

namespace crl::rl {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

enum class ChatTemplateKind { kQwen2ChatMl, kLlama3 };

class ChatTemplate {
 public:
  // Reads MODEL_DIR/tokenizer_config.json's chat_template, or, where the config has none, the
  // chat_template.jinja beside it (newer transformers save it so), and bos_token for Llama 3.
  // Throws InputError naming the file when it is missing or holds a template crl does not know.
  static ChatTemplate from_model_dir(const std::filesystem::path& model_dir);
  // From tokenizer_config.json's fields directly; `origin` names them in errors.
  static ChatTemplate from_text(const std::string& chat_template, const std::string& bos_token, const std::string& origin);

  ChatTemplateKind kind() const { return kind_; }
  // The template's output for `messages` followed by the assistant's generation prompt.
  std::string render(const std::vector<ChatMessage>& messages) const;
  // render() encoded as transformers does (see above).
  std::vector<int32_t> apply(const policy::Tokenizer& tokenizer, const std::vector<ChatMessage>& messages) const;

 private:
  ChatTemplate(ChatTemplateKind kind, std::string bos_token) : kind_(kind), bos_token_(std::move(bos_token)) {}
  ChatTemplateKind kind_;
  std::string bos_token_;
};

// A base model's prompt: the text encoded with the tokenizer's own post-processor (e.g. a
// leading <|begin_of_text|>); text that looks like a special token stays text.
std::vector<int32_t> raw_prompt_ids(const policy::Tokenizer& tokenizer, const std::string& text);

// The policy's prompt as token ids, as every stage and `crl eval-model` give it to the model: the
// user's message through `chat` (prompt_format chat), or raw_prompt_ids without one (prompt_format raw).
std::vector<int64_t> policy_prompt_ids(const policy::Tokenizer& tokenizer, const ChatTemplate* chat, const std::string& prompt);

}  // namespace crl::rl
