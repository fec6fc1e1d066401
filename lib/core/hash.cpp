// SHA-256 through OpenSSL's EVP interface.
#include "core/hash.h"

#include <openssl/evp.h>

#include <cstdint>

#include "core/error.h"

namespace crl {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1) {
    throw Error("OpenSSL: could not initialise a SHA-256 context");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(state_->ctx); }

Sha256& Sha256::update(std::string_view bytes) {
  EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
  return *this;
}

Sha256& Sha256::field(std::string_view value) {
  const uint64_t n = value.size();
  EVP_DigestUpdate(state_->ctx, &n, sizeof n);
  return update(value);
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(state_->ctx, digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex();
}

}  // namespace crl
