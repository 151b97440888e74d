// tensordctl's commands that inspect the server: devices, ops, health and sessions.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/tensordctl_commands.h"

namespace tensordctl {
namespace {

std::string MarkingName(tensord::v1::Marking marking) {
  switch (marking) {
    case tensord::v1::MARKING_DIFFERENTIABLE:
      return "differentiable";
    case tensord::v1::MARKING_ZERO_GRAD:
      return "zero_grad";
    case tensord::v1::MARKING_NON_DIFFERENTIABLE:
      return "non_differentiable";
    case tensord::v1::MARKING_UNMARKED:
      return "unmarked";
    default:
      return "unspecified";
  }
}

std::string DTypeList(const tc::OpInfo& op) {
  std::vector<std::string> names;
  for (int d : op.dtypes()) {
    absl::StatusOr<tc::DType> dtype = tc::DTypeFromProto(static_cast<tensord::v1::DType>(d));
    names.push_back(dtype.ok() ? tc::DTypeName(*dtype) : absl::StrCat(d));
  }
  return names.empty() ? "-" : absl::StrJoin(names, ",");
}

}  // namespace

int Devices(const tc::Client& client) {
  absl::StatusOr<std::vector<tc::DeviceInfo>> devices = client.Devices();
  if (!devices.ok()) return Fail(devices.status());
  std::printf("%-10s %-6s %-14s %-30s %s\n", "NAME", "KIND", "MEMORY", "VENDOR", "DESCRIPTION");
  for (const tc::DeviceInfo& d : *devices) {
    std::string memory = d.memory_bytes ? absl::StrCat(d.memory_bytes >> 20, " MiB") : "-";
    std::printf("%-10s %-6s %-14s %-30s %s\n", d.name.c_str(), d.kind.c_str(), memory.c_str(),
                d.vendor.empty() ? "-" : d.vendor.c_str(), d.description.c_str());
  }
  return 0;
}

int Ops(const tc::Client& client) {
  absl::StatusOr<std::vector<tc::OpInfo>> ops = client.Ops();
  if (!ops.ok()) return Fail(ops.status());
  // An ORIGIN column only when some op comes from a plugin: otherwise every row would say
  // "builtin".
  const bool plugins = std::any_of(ops->begin(), ops->end(), [](const tc::OpInfo& op) {
    return !op.origin().empty() && op.origin() != "builtin";
  });
  auto row = [plugins](const std::string& name, const std::string& category,
                       const std::string& marking, const std::string& dtypes,
                       const std::string& backends, const std::string& origin) {
    std::printf("%-28s %-12s %-19s %-24s ", name.c_str(), category.c_str(), marking.c_str(),
                dtypes.c_str());
    if (plugins) {
      std::printf("%-9s %s\n", backends.c_str(), origin.c_str());
    } else {
      std::printf("%s\n", backends.c_str());
    }
  };
  row("NAME", "CATEGORY", "MARKING", "DTYPES", "BACKENDS", "ORIGIN");
  for (const tc::OpInfo& op : *ops) {
    row(op.name(), op.category(), MarkingName(op.marking()), DTypeList(op),
        op.backends().empty() ? "-" : absl::StrJoin(op.backends(), ","), op.origin());
  }
  std::printf("%zu ops\n", ops->size());
  return 0;
}

int Health(const tc::Client& client) {
  absl::StatusOr<bool> serving = client.Health();
  if (!serving.ok()) {
    std::printf("NOT_SERVING\n");
    return Fail(serving.status());
  }
  std::printf("%s\n", *serving ? "SERVING" : "NOT_SERVING");
  return *serving ? 0 : 1;
}

int SessionCommand(const tc::Client& client, const Args& args) {
  if (args.positional.empty()) return Usage("session needs create, info, keepalive or close");
  const std::string& verb = args.positional[0];
  if (verb == "create") {
    tc::SessionOptions options;
    if (const std::string* d = args.Flag("device")) options.device = *d;
    if (const std::string* t = args.Flag("ttl"); t && !absl::SimpleAtoi(*t, &options.ttl_seconds)) {
      return Usage("--ttl takes a number of seconds");
    }
    if (const std::string* q = args.Flag("quota");
        q && !absl::SimpleAtoi(*q, &options.memory_quota_bytes)) {
      return Usage("--quota takes a number of bytes");
    }
    options.autodiff = args.Flag("no-autodiff") == nullptr;
    absl::StatusOr<tc::Session> session = client.CreateSession(options);
    if (!session.ok()) return Fail(session.status());
    session->Detach();
    std::printf("%s\n", session->id().c_str());
    return 0;
  }
  if (args.positional.size() != 2) return Usage(absl::StrCat("session ", verb, " needs an ID"));
  absl::StatusOr<tc::Session> session = client.AttachSession(args.positional[1]);
  if (!session.ok()) return Fail(session.status());
  if (verb == "info") {
    absl::StatusOr<tc::SessionInfo> info = session->Info();
    if (!info.ok()) return Fail(info.status());
    std::printf("%s\n", info->ToString().c_str());
    return 0;
  }
  if (verb == "keepalive") {
    absl::StatusOr<uint64_t> ttl = session->KeepAlive();
    if (!ttl.ok()) return Fail(ttl.status());
    std::printf("ttl %llu s\n", static_cast<unsigned long long>(*ttl));
    return 0;
  }
  if (verb == "close") {
    absl::Status closed = session->Close();
    return closed.ok() ? 0 : Fail(closed);
  }
  return Usage(absl::StrCat("unknown session command '", verb, "'"));
}

}  // namespace tensordctl
