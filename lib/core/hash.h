// SHA-256 content hashing (OpenSSL) for content-addressed caches and fingerprints.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace crl {

// Incremental hasher: add() pieces, then hex() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  // Adds raw bytes, as the standard digest does.
  Sha256& update(std::string_view bytes);
  // Adds a length-prefixed field, so fields ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view value);
  std::string hex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string sha256_hex(std::string_view data);

}  // namespace crl
