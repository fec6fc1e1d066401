// StatusTally (the progress line's statuses) and stage_warning (a generating stage that never saw
// a correct program), lib/rl/status_tally.h.
#include "rl/status_tally.h"

#include <gtest/gtest.h>

namespace crl::rl {
namespace {

TEST(StatusTally, NamesEveryStatusThatOccurredHacksByKindOkFirst) {
  StatusTally step;
  for (const char* s : {"format_error", "mismatch", "ok", "hack:aliasing", "compile_error", "format_error", "hack:timer_tampering",
                        "internal_error", "ok", "hack:aliasing"}) {
    step.add(s);
  }
  EXPECT_EQ(step.text(), "ok 2, compile_error 1, mismatch 1, hack:aliasing 2, hack:timer_tampering 1, format_error 2, internal_error 1");
  EXPECT_EQ(step.total(), 10);
  StatusTally none_ok;
  none_ok.add("format_error", 3);
  EXPECT_EQ(none_ok.text(), "ok 0, format_error 3") << "ok is always said, also when 0";
}

TEST(StatusTally, AStageWithoutAnOkRolloutEndsWithAWarning) {
  StatusTally stage;
  EXPECT_EQ(stage_warning("crl", 5, stage, false), "") << "no rollouts: nothing to warn of";
  stage.add("format_error", 72);
  const std::string all_format = stage_warning("crl", 5, stage, false);
  EXPECT_NE(all_format.find("the crl stage that ended at step 5 judged no program: all 72 of its rollouts were format_error"),
            std::string::npos)
      << all_format;
  EXPECT_NE(all_format.find("max_new_tokens"), std::string::npos) << all_format;
  stage.add("compile_error", 8);
  const std::string none_ok = stage_warning("selftrain", 9, stage, true);
  EXPECT_NE(none_ok.find("the selftrain stage that ended at step 9 (since it resumed) had no correct program: none of its 80 "
                         "rollouts was ok (ok 0, compile_error 8, format_error 72)"),
            std::string::npos)
      << none_ok;
  stage.add("ok");
  EXPECT_EQ(stage_warning("crl", 5, stage, false), "") << "one correct program is a stage that could learn";
}

}  // namespace
}  // namespace crl::rl
