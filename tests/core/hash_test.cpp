// Tests SHA-256 against the standard test vectors and the field framing.
#include <gtest/gtest.h>

#include "core/hash.h"

namespace crl {
namespace {

TEST(Sha256, MatchesStandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  Sha256 h;
  h.update("a").update("bc");
  EXPECT_EQ(h.hex(), sha256_hex("abc"));
}

TEST(Sha256, FieldsAreFramed) {
  Sha256 a, b;
  a.field("ab").field("c");
  b.field("a").field("bc");
  EXPECT_NE(a.hex(), b.hex());
}

}  // namespace
}  // namespace crl
