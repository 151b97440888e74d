// tensordctl's transfer commands: put, get and roundtrip of .npy files, with a progress line
// for a person watching a terminal.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "client/cpp/tensordctl_commands.h"
#include "client/cpp/tensordctl_format.h"

namespace tensordctl {
namespace {

// A transfer's progress on stderr, redrawn in place with \r, then a summary line. Off when
// stderr is not a terminal (in a pipe or a CI log the redraws would only be noise) and for
// tensors under kMinBytes, which are done before anyone could read a progress line.
class TransferMeter {
 public:
  static constexpr uint64_t kMinBytes = uint64_t{1} << 20;

  // `verb` starts each line ("put", "get"). The clock starts now.
  explicit TransferMeter(std::string verb)
      : verb_(std::move(verb)), on_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {
    last_draw_ = start_;
  }
  TransferMeter(const TransferMeter&) = delete;
  TransferMeter& operator=(const TransferMeter&) = delete;
  // A failed transfer leaves its progress line; the error goes below it, not over it.
  ~TransferMeter() {
    if (drawn_ && !finished_) std::fputc('\n', stderr);
  }

  // For PutOptions/GetOptions::progress; empty when the meter is off, so that the client
  // library skips the calls altogether.
  tc::TransferProgress Callback() {
    if (!on_) return {};
    return [this](uint64_t done, uint64_t total) { Update(done, total); };
  }

  // The summary line of a transfer that completed (none when the meter showed nothing).
  void Finish() {
    finished_ = true;
    if (!on_ || total_ < kMinBytes) return;
    const double seconds = Elapsed();
    Draw(absl::StrFormat("%s %s in %s, %s/s", verb_, HumanBytes(total_), HumanDuration(seconds),
                         HumanBytes(Rate(total_, seconds))));
    std::fputc('\n', stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  // At most this many redraws a second: a terminal need not see every chunk.
  static constexpr auto kRedrawEvery = std::chrono::milliseconds(250);

  void Update(uint64_t done, uint64_t total) {
    total_ = total;
    const Clock::time_point now = Clock::now();
    if (total < kMinBytes || done >= total || now - last_draw_ < kRedrawEvery) return;
    last_draw_ = now;
    const double rate = Rate(done, Elapsed());
    const std::string left =
        rate > 0 ? HumanDuration(static_cast<double>(total - done) / rate) : "-";
    Draw(absl::StrFormat("%s %s / %s  %s/s  %s left", verb_, HumanBytes(done), HumanBytes(total),
                         HumanBytes(rate), left));
  }

  // Overwrites the line drawn before; spaces erase what a longer line left.
  void Draw(const std::string& line) {
    const size_t pad = line.size() < width_ ? width_ - line.size() : 0;
    std::fprintf(stderr, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
    std::fflush(stderr);
    width_ = line.size();
    drawn_ = true;
  }

  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  static double Rate(uint64_t bytes, double seconds) {
    return seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
  }

  const std::string verb_;
  const bool on_;
  const Clock::time_point start_;
  Clock::time_point last_draw_;
  uint64_t total_ = 0;
  size_t width_ = 0;
  bool drawn_ = false;
  bool finished_ = false;
};

void PrintTensorType(const tc::HostTensor& value) {
  std::fprintf(stderr, "%s%s\n", tc::DTypeName(value.dtype()).c_str(),
               tc::ShapeString(value.shape()).c_str());
}

absl::StatusOr<tc::Tensor> PutShowingProgress(tc::Session& session, const tc::HostTensor& value) {
  TransferMeter meter("put");
  tc::PutOptions options;
  options.progress = meter.Callback();
  absl::StatusOr<tc::Tensor> tensor = session.Put(value, options);
  if (tensor.ok()) meter.Finish();
  return tensor;
}

absl::StatusOr<tc::HostTensor> GetShowingProgress(tc::Session& session, uint64_t handle) {
  TransferMeter meter("get");
  tc::GetOptions options;
  options.progress = meter.Callback();
  absl::StatusOr<tc::HostTensor> value = session.Get(handle, options);
  if (value.ok()) meter.Finish();
  return value;
}

}  // namespace

int Put(const tc::Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("put needs one FILE.npy");
  absl::StatusOr<tc::HostTensor> value = tc::HostTensor::ReadNpy(args.positional[0]);
  if (!value.ok()) return Fail(value.status());
  const std::string* session_id = args.Flag("session");
  absl::StatusOr<tc::Session> session =
      session_id ? client.AttachSession(*session_id) : client.CreateSession();
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<tc::Tensor> tensor = PutShowingProgress(*session, *value);
  if (!tensor.ok()) return Fail(tensor.status());
  // The session and the tensor must outlive this process (a session this command created for
  // a put that failed is closed instead).
  session->Detach();
  // The handle is named by a later `get`.
  const uint64_t handle = tensor->ReleaseOwnership();
  if (session_id) {
    std::printf("%llu\n", static_cast<unsigned long long>(handle));
  } else {
    std::printf("%s %llu\n", session->id().c_str(), static_cast<unsigned long long>(handle));
  }
  PrintTensorType(*value);
  return 0;
}

int Get(const tc::Client& client, const Args& args) {
  const std::string* session_id = args.Flag("session");
  uint64_t handle = 0;
  if (!session_id || args.positional.size() != 2 ||
      !absl::SimpleAtoi(args.positional[0], &handle)) {
    return Usage("get needs --session ID HANDLE OUT.npy");
  }
  absl::StatusOr<tc::Session> session = client.AttachSession(*session_id);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<tc::HostTensor> value = GetShowingProgress(*session, handle);
  if (!value.ok()) return Fail(value.status());
  if (absl::Status s = value->WriteNpy(args.positional[1]); !s.ok()) return Fail(s);
  PrintTensorType(*value);
  return 0;
}

int Roundtrip(const tc::Client& client, const Args& args) {
  if (args.positional.size() != 2) return Usage("roundtrip needs IN.npy OUT.npy");
  absl::StatusOr<tc::HostTensor> value = tc::HostTensor::ReadNpy(args.positional[0]);
  if (!value.ok()) return Fail(value.status());
  absl::StatusOr<tc::Session> session = client.CreateSession();
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<tc::Tensor> tensor = PutShowingProgress(*session, *value);
  if (!tensor.ok()) return Fail(tensor.status());
  absl::StatusOr<tc::HostTensor> back = GetShowingProgress(*session, tensor->handle());
  if (!back.ok()) return Fail(back.status());
  if (absl::Status s = back->WriteNpy(args.positional[1]); !s.ok()) return Fail(s);
  std::printf("%s %s%s %zu bytes %s\n", session->id().c_str(), tc::DTypeName(back->dtype()).c_str(),
              tc::ShapeString(back->shape()).c_str(), back->nbytes(),
              *back == *value ? "identical" : "DIFFERENT");
  return *back == *value ? 0 : 1;
}

}  // namespace tensordctl
