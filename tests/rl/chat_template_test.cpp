// Chat templates against transformers' apply_chat_template(add_generation_prompt=True): the
// golden text and ids in tests/data/rl/chat/<name>/golden.json (tools/golden/make_chat_template_golden.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "rl/chat_template.h"

namespace crl::rl {
namespace {

const std::string kChat = std::string(CRL_TEST_DATA_DIR) + "/rl/chat/";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return nlohmann::json::parse(in);
}

void check_golden(const std::string& name, const std::string& tokenizer_path, ChatTemplateKind kind) {
  const ChatTemplate tmpl = ChatTemplate::from_model_dir(kChat + name);
  EXPECT_EQ(tmpl.kind(), kind);
  const policy::Tokenizer tokenizer = policy::Tokenizer::from_file(tokenizer_path);
  const nlohmann::json golden = read_json(kChat + name + "/golden.json");
  ASSERT_GE(golden["cases"].size(), 4u);
  for (const auto& c : golden["cases"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    EXPECT_EQ(tmpl.render(messages), c["text"].get<std::string>()) << name << " " << c["messages"].dump();
    EXPECT_EQ(tmpl.apply(tokenizer, messages), c["ids"].get<std::vector<int32_t>>()) << name << " " << c["messages"].dump();
  }
}

TEST(ChatTemplate, Qwen2ChatMlMatchesTransformers) {
  check_golden("qwen2", std::string(CRL_TEST_DATA_DIR) + "/policy/tokenizers/qwen2_like/tokenizer.json",
               ChatTemplateKind::kQwen2ChatMl);
}

TEST(ChatTemplate, Llama3MatchesTransformers) {
  check_golden("llama3", kChat + "llama3/tokenizer.json", ChatTemplateKind::kLlama3);
}

// Newer transformers save the template in chat_template.jinja beside a config without one: the same
// template read from there is the same template, and an unknown one there is refused naming that file.
TEST(ChatTemplate, ATemplateInChatTemplateJinjaIsReadToo) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "crl-chat-jinja";
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json config = read_json(kChat + "qwen2/tokenizer_config.json");
  const std::string text = config["chat_template"].get<std::string>();
  config.erase("chat_template");
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  std::ofstream(dir / "chat_template.jinja") << text;
  EXPECT_EQ(ChatTemplate::from_model_dir(dir).kind(), ChatTemplateKind::kQwen2ChatMl);
  std::ofstream(dir / "chat_template.jinja") << text << "{# another #}";
  try {
    ChatTemplate::from_model_dir(dir);
    ADD_FAILURE() << "an unknown template in chat_template.jinja was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template.jinja"), std::string::npos) << e.what();
  }
  fs::remove(dir / "chat_template.jinja");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir), InputError);  // neither: refused
  fs::remove_all(dir);
}

TEST(ChatTemplate, AnyOtherTemplateIsRefusedByName) {
  try {
    ChatTemplate::from_model_dir(kChat + "other");
    FAIL() << "an unknown template was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tokenizer_config.json"), std::string::npos) << what;
    EXPECT_NE(what.find("{{ bos_token }}"), std::string::npos) << what;  // its first line
    EXPECT_NE(what.find("sha256 5ded1cc8"), std::string::npos) << what;
    EXPECT_NE(what.find("prompt_format: raw"), std::string::npos) << what;
  }
  // One character off a known template is another template.
  const auto qwen = read_json(kChat + "qwen2/tokenizer_config.json");
  EXPECT_THROW(ChatTemplate::from_text(qwen["chat_template"].get<std::string>() + " ", "", "x"), InputError);
  EXPECT_THROW(ChatTemplate::from_model_dir(testing::TempDir() + "/no_such_model"), InputError);
}

TEST(ChatTemplate, RawPromptsUseThePostProcessorAndKeepSpecialLookingText) {
  const policy::Tokenizer tokenizer =
      policy::Tokenizer::from_file(std::string(CRL_TEST_DATA_DIR) + "/policy/tokenizers/llama3_like/tokenizer.json");
  const auto ids = raw_prompt_ids(tokenizer, "x <|im_start|>");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], *tokenizer.token_to_id("<|begin_of_text|>"));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_NE(ids[i], *tokenizer.token_to_id("<|im_start|>"));
}

}  // namespace
}  // namespace crl::rl
