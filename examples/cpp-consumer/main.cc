// Connects to a tensord server, computes relu(a @ b - 20) and its sum on it, and checks both
// against the values worked out by hand; also checks that a shape error comes back typed.
//   tensord_consumer [HOST:PORT]   (default: $TENSORD_ADDRESS, else 127.0.0.1:50051)
// Exit status 0 when every result is right, 1 on a wrong result or any failed call.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/cpp/tensord.h"

namespace tc = tensord::client;

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "tensord_consumer: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

std::string Join(const std::vector<float>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(values[i]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:50051";
  if (argc > 1) {
    address = argv[1];
  } else if (const char* env = std::getenv("TENSORD_ADDRESS"); env && *env) {
    address = env;
  }

  tc::ClientOptions options;
  options.connect_timeout_ms = 10000;  // fail, rather than wait forever, without a server
  options.call_timeout_ms = 30000;
  absl::StatusOr<tc::Client> client = tc::Client::Connect(address, options);
  if (!client.ok()) return Fail("connect to " + address, client.status());
  absl::StatusOr<tc::Session> session = client->CreateSession();
  if (!session.ok()) return Fail("create a session", session.status());

  absl::StatusOr<tc::Tensor> a =
      session->Put(tc::HostTensor(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  absl::StatusOr<tc::Tensor> b =
      session->Put(tc::HostTensor(std::vector<float>{5, 6, 7, 8}, {2, 2}));
  if (!a.ok()) return Fail("put a", a.status());
  if (!b.ok()) return Fail("put b", b.status());

  // a @ b = [[19, 22], [43, 50]]; minus 20 and relu: [[0, 2], [23, 30]]; sum 55. Small
  // integers, so every step is exact in f32 and the comparison can be too.
  absl::StatusOr<tc::Tensor> y = tc::Relu(tc::Matmul(*a, *b) - 20.0);
  absl::StatusOr<tc::Tensor> total = tc::Sum(y);
  if (!y.ok()) return Fail("relu(a @ b - 20)", y.status());
  if (!total.ok()) return Fail("sum", total.status());

  absl::StatusOr<std::vector<float>> values = y->ToVector<float>();
  if (!values.ok()) return Fail("fetch y", values.status());
  absl::StatusOr<double> sum = total->Item();
  if (!sum.ok()) return Fail("fetch the sum", sum.status());
  std::printf("relu(a @ b - 20) = %s [%s]\nsum = %g\n", tc::ShapeString(y->shape()).c_str(),
              Join(*values).c_str(), *sum);

  const std::vector<float> want = {0.f, 2.f, 23.f, 30.f};
  if (y->shape() != tc::Shape{2, 2} || *values != want || *sum != 55.0) {
    std::fprintf(stderr, "tensord_consumer: wrong result: want [2, 2] [%s] and sum 55\n",
                 Join(want).c_str());
    return 1;
  }

  // A [2, 2] @ [3] matmul is refused with its typed reason, decoded from the error details.
  absl::StatusOr<tc::Tensor> bad = tc::Matmul(*a, tc::HostTensor(std::vector<float>{1, 2, 3}));
  if (bad.ok() || tc::ReasonOf(bad.status()) != tensord::v1::SHAPE_MISMATCH) {
    std::fprintf(stderr, "tensord_consumer: a [2, 2] @ [3] matmul gave %s, want SHAPE_MISMATCH\n",
                 bad.ok() ? "a result" : bad.status().ToString().c_str());
    return 1;
  }
  std::printf("[2, 2] @ [3]: %s, as expected\n", tc::ReasonNameOf(bad.status()).c_str());

  absl::Status closed = session->Close();
  if (!closed.ok()) return Fail("close the session", closed);
  std::printf("ok\n");
  return 0;
}
