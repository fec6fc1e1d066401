// Chat templates rendered as their Jinja text does (pinned by tests/data/rl/chat/*/golden.json).
#include "rl/chat_template.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/read_file.h"
#include "core/hash.h"

namespace crl::rl {
namespace {

// SHA-256 of the templates' exact text (tools/golden/make_chat_template_golden.py holds them).
constexpr const char* kQwen2ChatMlSha256 = "793202280c0910ab26bc6eb57c8212c2417324c6d8c4efd0d10d59092ab3e3eb";
constexpr const char* kLlama3Sha256 = "ba03a121d097859c7b5b9cd03af99aafe95275210d2876f642ad9929a150f122";

// What Jinja's `trim` removes: Python's str.strip(), i.e. the characters for which isspace() holds.
bool strip_one_space(const std::string& s, size_t& begin, size_t& end, bool from_front) {
  static const char* const kSpaces[] = {" ", "\t", "\n", "\v", "\f", "\r", "\x1c", "\x1d", "\x1e", "\x1f",
                                        "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81",
                                        "\xe2\x80\x82", "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86",
                                        "\xe2\x80\x87", "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8",
                                        "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const char* space : kSpaces) {
    const size_t n = std::char_traits<char>::length(space);
    if (end - begin < n) continue;
    const size_t at = from_front ? begin : end - n;
    if (s.compare(at, n, space) == 0) {
      if (from_front) {
        begin += n;
      } else {
        end -= n;
      }
      return true;
    }
  }
  return false;
}

std::string python_strip(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && strip_one_space(s, begin, end, true)) {
  }
  while (begin < end && strip_one_space(s, begin, end, false)) {
  }
  return s.substr(begin, end - begin);
}

// tokenizer_config.json's special-token fields are a string or an AddedToken object {content}.
std::string token_field(const nlohmann::json& config, const std::string& key) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

ChatTemplate ChatTemplate::from_text(const std::string& chat_template, const std::string& bos_token,
                                     const std::string& origin) {
  const std::string hash = sha256_hex(chat_template);
  if (hash == kQwen2ChatMlSha256) return ChatTemplate(ChatTemplateKind::kQwen2ChatMl, "");
  if (hash == kLlama3Sha256) {
    if (bos_token.empty()) throw InputError(fmt::format("{}: the Llama 3 chat template needs a bos_token", origin));
    return ChatTemplate(ChatTemplateKind::kLlama3, bos_token);
  }
  const std::string first_line = chat_template.substr(0, std::min(chat_template.find('\n'), size_t{80}));
  throw InputError(fmt::format(
      "{}: chat template '{}...' (sha256 {}) is not one crl knows (Qwen2 ChatML, Llama 3); crl renders only "
      "templates it was checked against. Use a checkpoint with one of those, or `prompt_format: raw` in the job file",
      origin, first_line, hash));
}

// tokenizer_config.json holds the template and the added tokens: a few hundred KB at most.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

ChatTemplate ChatTemplate::from_model_dir(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) {
    throw InputError(fmt::format("{}: missing, so the model has no chat template; use `prompt_format: raw` for a base "
                                 "model", path.string()));
  }
  const auto config = nlohmann::json::parse(read_file(path, "tokenizer config", kMaxConfigBytes), nullptr, false);
  if (!config.is_object()) throw InputError(fmt::format("{}: not a JSON object", path.string()));
  if (!config.contains("chat_template")) {
    // transformers 4.43 and later save the template beside the config, in chat_template.jinja.
    const std::filesystem::path jinja = model_dir / "chat_template.jinja";
    if (std::filesystem::exists(jinja)) {
      return from_text(read_file(jinja, "chat template", kMaxConfigBytes), token_field(config, "bos_token"), jinja.string());
    }
  }
  if (!config.contains("chat_template") || !config["chat_template"].is_string()) {
    throw InputError(fmt::format("{}: no 'chat_template' string and no chat_template.jinja beside it (a list of named "
                                 "templates is not supported); use `prompt_format: raw` for a base model",
                                 path.string()));
  }
  return from_text(config["chat_template"].get<std::string>(), token_field(config, "bos_token"), path.string());
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  std::string out;
  if (kind_ == ChatTemplateKind::kQwen2ChatMl) {
    if (!messages.empty() && messages[0].role != "system") out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
    for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    out += "<|im_start|>assistant\n";
  } else {
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i == 0) out += bos_token_;
      out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + python_strip(messages[i].content) +
             "<|eot_id|>";
    }
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

std::vector<int32_t> ChatTemplate::apply(const policy::Tokenizer& tokenizer, const std::vector<ChatMessage>& messages) const {
  return tokenizer.encode(render(messages), /*add_special_tokens=*/false, /*parse_special_tokens=*/true);
}

std::vector<int32_t> raw_prompt_ids(const policy::Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.encode(text, /*add_special_tokens=*/true, /*parse_special_tokens=*/false);
}

std::vector<int64_t> policy_prompt_ids(const policy::Tokenizer& tokenizer, const ChatTemplate* chat, const std::string& prompt) {
  const std::vector<int32_t> ids = chat != nullptr ? chat->apply(tokenizer, {{"user", prompt}}) : raw_prompt_ids(tokenizer, prompt);
  return {ids.begin(), ids.end()};
}

}  // namespace crl::rl
