// The dispatch protocol's messages (dist/dispatch.h) as dist::Group decodes them: each round-trips,
// and a missing or mistyped field is an error naming the message and its sender, never a default.
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/dispatch.h"
#include "dist/group.h"

namespace crl::dist {
namespace {

template <class T>
T round_trip(const T& message) {
  return Group::decode<T>(nlohmann::json(message).dump(), "a test message", 3);
}

std::string error_of(const std::string& text) {
  try {
    Group::decode<WorkMessage>(text, "a work message", 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DispatchMessages, EachRoundTrips) {
  const WorkMessage work = round_trip(WorkMessage{WorkOrder{7, "relu", {{"program", "x"}}}, {}});
  ASSERT_TRUE(work.work.has_value());
  EXPECT_EQ(work.work->work_id, 7);
  EXPECT_EQ(work.work->affinity, "relu");
  EXPECT_EQ(work.work->payload["program"], "x");
  const WorkMessage stop = round_trip(WorkMessage{std::nullopt, {{"stopped", "at step 3"}}});
  EXPECT_FALSE(stop.work.has_value());
  EXPECT_EQ(stop.stop_info["stopped"], "at step 3");
  const WorkRequest first = round_trip(WorkRequest{});
  EXPECT_FALSE(first.done.has_value());
  const WorkRequest next = round_trip(WorkRequest{WorkResult{7, 1.5, {{"status", "ok"}}, 2}});
  ASSERT_TRUE(next.done.has_value());
  EXPECT_EQ(next.done->work_id, 7);
  EXPECT_EQ(next.done->seconds, 1.5);
  EXPECT_EQ(next.done->worker_rank, -1);  // the receiver sets it from the message's sender
  EXPECT_EQ(round_trip(StopNote{10}).signal, 10);
}

TEST(DispatchMessages, MissingOrMistypedFieldsAreErrorsNamingTheSender) {
  const std::string missing = error_of(R"({"work": {"work_id": 1, "affinity": "relu"}})");
  EXPECT_NE(missing.find("a work message from rank 0 is unreadable"), std::string::npos) << missing;
  EXPECT_NE(error_of(R"({"work": {"work_id": "1", "affinity": "a", "payload": {}}})"), "");
  EXPECT_NE(error_of(R"({"stop": true})"), "");  // the stop's info is an object
  EXPECT_NE(error_of(R"({"work": {"work_id": 1, "affinity": "a", "payload": {}}, "stop": {}})"), "");
  EXPECT_NE(error_of("not json"), "");
  EXPECT_THROW(Group::decode<WorkRequest>(R"({"done": {"work_id": 1, "payload": {}}})", "a request", 2), Error);
  EXPECT_THROW(Group::decode<WorkRequest>("[]", "a request", 2), Error);
  EXPECT_THROW(Group::decode<StopNote>(R"({"signal": 0})", "a stop note", 2), Error);
}

}  // namespace
}  // namespace crl::dist
