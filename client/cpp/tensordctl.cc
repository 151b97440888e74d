// tensordctl: command-line client of a tensord server.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/tensord.h"

namespace tc = ::tensord::client;

namespace {

constexpr char kUsage[] =
    R"(usage: tensordctl [--address HOST:PORT] [--timeout SECONDS] [--tls-ca CA.pem]
                  [--tls-cert CERT.pem --tls-key KEY.pem] [--token TOKEN] COMMAND [ARGS]

The address defaults to $TENSORD_ADDRESS, else 127.0.0.1:50051. --tls-ca connects with TLS and
verifies the server against that CA; --tls-cert/--tls-key present a client certificate (mutual
TLS). The bearer token defaults to $TENSORD_TOKEN (prefer it: a command line is visible to
other local users).

commands:
  devices                       list the server's devices
  ops                           list ops: name, category, autodiff marking, dtypes, backends
                                (and origin, when the server has plugin ops)
  health                        print the serving status; exit 0 only when SERVING
  session create [--device D] [--ttl SECONDS] [--quota BYTES] [--no-autodiff]
                                create a session that lives until its TTL; print its id
  session info ID               show a session's tensors, memory and contexts
  session keepalive ID          reset a session's idle timer
  session close ID              free a session at once
  put [--session ID] FILE.npy   upload a tensor; prints "SESSION_ID HANDLE" (a new session
                                that lives until its TTL), or only HANDLE with --session
  get --session ID HANDLE OUT.npy
                                download a tensor to a .npy file
  roundtrip IN.npy OUT.npy      put then get within one session; exit 1 if bytes differ
  demo [--steps N] [--lr X] [--checkpointing none|balanced] [--seed S]
                                train a 2-16-2 MLP through the server and print the loss
)";

int Fail(const absl::Status& status) {
  std::string line = absl::StrCat("tensordctl: ", status.message());
  if (std::string reason = tc::ReasonNameOf(status); !reason.empty()) {
    absl::StrAppend(&line, " [", absl::StatusCodeToString(status.code()), " ", reason);
    for (const auto& [key, value] : tc::MetadataOf(status)) {
      absl::StrAppend(&line, " ", key, "=", value);
    }
    absl::StrAppend(&line, "]");
  } else {
    absl::StrAppend(&line, " [", absl::StatusCodeToString(status.code()), "]");
  }
  std::cerr << line << "\n";
  return 1;
}

int Usage(const std::string& problem) {
  std::cerr << "tensordctl: " << problem << "\n" << kUsage;
  return 2;
}

// Flags of one command: "--name value" pairs and bare "--switch"es; the rest are positional.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> flags;

  const std::string* Flag(const std::string& name) const {
    for (const auto& [k, v] : flags) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

Args ParseArgs(const std::vector<std::string>& argv, const std::vector<std::string>& switches) {
  Args out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      std::string name = a.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        out.flags.emplace_back(name.substr(0, eq), name.substr(eq + 1));
      } else if (std::find(switches.begin(), switches.end(), name) != switches.end() ||
                 i + 1 == argv.size()) {
        out.flags.emplace_back(name, "");
      } else {
        out.flags.emplace_back(name, argv[++i]);
      }
    } else {
      out.positional.push_back(a);
    }
  }
  return out;
}

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

int Devices(const tc::Client& client) {
  absl::StatusOr<std::vector<tc::DeviceInfo>> devices = client.Devices();
  if (!devices.ok()) return Fail(devices.status());
  std::printf("%-10s %-6s %-14s %s\n", "NAME", "KIND", "MEMORY", "DESCRIPTION");
  for (const tc::DeviceInfo& d : *devices) {
    std::string memory = d.memory_bytes ? absl::StrCat(d.memory_bytes >> 20, " MiB") : "-";
    std::printf("%-10s %-6s %-14s %s\n", d.name.c_str(), d.kind.c_str(), memory.c_str(),
                d.description.c_str());
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

int Put(const tc::Client& client, const Args& args) {
  if (args.positional.size() != 1) return Usage("put needs one FILE.npy");
  absl::StatusOr<tc::HostTensor> value = tc::HostTensor::ReadNpy(args.positional[0]);
  if (!value.ok()) return Fail(value.status());
  const std::string* session_id = args.Flag("session");
  absl::StatusOr<tc::Session> session =
      session_id ? client.AttachSession(*session_id) : client.CreateSession();
  if (!session.ok()) return Fail(session.status());
  // The session and the tensor must outlive this process.
  session->Detach();
  absl::StatusOr<tc::Tensor> tensor = session->Put(*value);
  if (!tensor.ok()) return Fail(tensor.status());
  // The handle is named by a later `get`.
  const uint64_t handle = tensor->ReleaseOwnership();
  if (session_id) {
    std::printf("%llu\n", static_cast<unsigned long long>(handle));
  } else {
    std::printf("%s %llu\n", session->id().c_str(), static_cast<unsigned long long>(handle));
  }
  std::fprintf(stderr, "%s%s\n", tc::DTypeName(value->dtype()).c_str(),
               tc::ShapeString(value->shape()).c_str());
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
  absl::StatusOr<tc::HostTensor> value = session->Get(handle);
  if (!value.ok()) return Fail(value.status());
  if (absl::Status s = value->WriteNpy(args.positional[1]); !s.ok()) return Fail(s);
  std::fprintf(stderr, "%s%s\n", tc::DTypeName(value->dtype()).c_str(),
               tc::ShapeString(value->shape()).c_str());
  return 0;
}

int Roundtrip(const tc::Client& client, const Args& args) {
  if (args.positional.size() != 2) return Usage("roundtrip needs IN.npy OUT.npy");
  absl::StatusOr<tc::HostTensor> value = tc::HostTensor::ReadNpy(args.positional[0]);
  if (!value.ok()) return Fail(value.status());
  absl::StatusOr<tc::Session> session = client.CreateSession();
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<tc::Tensor> tensor = session->Put(*value);
  if (!tensor.ok()) return Fail(tensor.status());
  absl::StatusOr<tc::HostTensor> back = tensor->ToHost();
  if (!back.ok()) return Fail(back.status());
  if (absl::Status s = back->WriteNpy(args.positional[1]); !s.ok()) return Fail(s);
  std::printf("%s %s%s %zu bytes %s\n", session->id().c_str(), tc::DTypeName(back->dtype()).c_str(),
              tc::ShapeString(back->shape()).c_str(), back->nbytes(),
              *back == *value ? "identical" : "DIFFERENT");
  return *back == *value ? 0 : 1;
}

// The demo's data: points in [-1, 1]^2, class 1 outside the circle of radius^2 0.5.
void MakeCircles(int n, uint32_t seed, std::vector<float>* x, std::vector<int64_t>* y) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    float a = u(rng), b = u(rng);
    x->push_back(a);
    x->push_back(b);
    y->push_back(a * a + b * b > 0.5f ? 1 : 0);
  }
}

absl::Status RunDemo(const tc::Client& client, int steps, double lr, tc::Checkpointing ckpt,
                     uint32_t seed) {
  constexpr int kPoints = 256, kHidden = 16;
  absl::StatusOr<tc::Session> session = client.CreateSession();
  if (!session.ok()) return session.status();
  absl::StatusOr<tc::AutodiffContext> ctx = session->OpenAutodiff(ckpt);
  if (!ctx.ok()) return ctx.status();

  std::vector<float> xs;
  std::vector<int64_t> ys;
  MakeCircles(kPoints, seed, &xs, &ys);
  absl::StatusOr<tc::Tensor> x = session->Put(tc::HostTensor(xs, {kPoints, 2}));
  if (!x.ok()) return x.status();
  absl::StatusOr<tc::Tensor> y = session->Put(tc::HostTensor(ys));
  if (!y.ok()) return y.status();

  // Parameters are created on the server: randn scaled (He init) as requires-grad leaves.
  tc::Batch init = session->NewBatch({/*no_grad=*/false, ctx->id()});
  auto he = [&](std::vector<int64_t> shape, int64_t s) {
    tc::CallRef r = init.Add("randn", {}, {{"shape", shape}, {"seed", s}});
    return init.Add("mul", {r, std::sqrt(2.0 / static_cast<double>(shape[0]))}, {}, {true});
  };
  tc::CallRef w1 = he({2, kHidden}, seed + 1);
  tc::CallRef b1 = init.Add("zeros", {}, {{"shape", {kHidden}}}, {true});
  tc::CallRef w2 = he({kHidden, 2}, seed + 2);
  tc::CallRef b2 = init.Add("zeros", {}, {{"shape", {2}}}, {true});
  absl::StatusOr<tc::BatchResult> created = init.Run();
  if (!created.ok()) return created.status();
  std::vector<tc::Tensor> params = {created->output(w1), created->output(b1), created->output(w2),
                                    created->output(b2)};
  std::printf("training a 2-%d-2 MLP on %d points (session %s, %s checkpointing, lr %g)\n", kHidden,
              kPoints, session->id().c_str(),
              ckpt == tc::Checkpointing::kBalanced ? "balanced" : "no", lr);

  double first_loss = 0, last_loss = 0;
  tc::Tensor logits;
  for (int step = 1; step <= steps; ++step) {
    tc::TensorOr out =
        tc::Matmul(tc::Relu(tc::Matmul(*x, params[0]) + params[1]), params[2]) + params[3];
    tc::TensorOr loss = tc::CrossEntropy(out, *y);
    if (!loss.ok()) return loss.status();
    absl::StatusOr<tc::Gradients> grads = ctx->Backward({*loss});
    if (!grads.ok()) return grads.status();
    // SGD: p <- p - lr * grad, in place, without recording.
    tc::Batch update = session->NewBatch({/*no_grad=*/true});
    for (const tc::Tensor& p : params) {
      tc::CallRef scaled = update.Add("mul", {grads->grad(p), lr});
      update.Add("assign", {p, update.Add("sub", {p, scaled})});
    }
    if (absl::StatusOr<tc::BatchResult> r = update.Run(); !r.ok()) return r.status();
    absl::StatusOr<double> value = loss->Item();
    if (!value.ok()) return value.status();
    if (step == 1) first_loss = *value;
    last_loss = *value;
    std::printf("step %4d  loss %.5f\n", step, *value);
    logits = *out;
  }
  // Accuracy of the last forward pass, computed here from the logits.
  absl::StatusOr<std::vector<float>> l = logits.ToVector<float>();
  if (!l.ok()) return l.status();
  int correct = 0;
  for (int i = 0; i < kPoints; ++i) correct += ((*l)[2 * i + 1] > (*l)[2 * i]) == (ys[i] == 1);
  std::printf("loss %.5f -> %.5f, accuracy %.1f%%\n", first_loss, last_loss,
              100.0 * correct / kPoints);
  if (!(last_loss < first_loss)) {
    return absl::InternalError(
        absl::StrCat("demo: the loss did not fall (", first_loss, " -> ", last_loss, ")"));
  }
  return absl::OkStatus();
}

int Demo(const tc::Client& client, const Args& args) {
  int steps = 100;
  double lr = 0.5;
  uint32_t seed = 7;
  tc::Checkpointing ckpt = tc::Checkpointing::kNone;
  if (const std::string* s = args.Flag("steps");
      s && (!absl::SimpleAtoi(*s, &steps) || steps < 1)) {
    return Usage("--steps takes a positive number");
  }
  if (const std::string* s = args.Flag("lr"); s && !absl::SimpleAtod(*s, &lr)) {
    return Usage("--lr takes a number");
  }
  if (const std::string* s = args.Flag("seed"); s && !absl::SimpleAtoi(*s, &seed)) {
    return Usage("--seed takes a number");
  }
  if (const std::string* s = args.Flag("checkpointing")) {
    if (*s == "balanced") {
      ckpt = tc::Checkpointing::kBalanced;
    } else if (*s != "none") {
      return Usage("--checkpointing takes none or balanced");
    }
  }
  absl::Status status = RunDemo(client, steps, lr, ckpt, seed);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:50051";
  if (const char* env = std::getenv("TENSORD_ADDRESS"); env != nullptr && *env != '\0') {
    address = env;
  }
  double timeout_s = 0;
  std::string tls_ca, tls_cert, tls_key, token;
  if (const char* env = std::getenv("TENSORD_TOKEN"); env != nullptr) token = env;
  // The options that come before the command, as "--name value" or "--name=value".
  const std::vector<std::pair<std::string, std::string*>> global = {{"address", &address},
                                                                    {"tls-ca", &tls_ca},
                                                                    {"tls-cert", &tls_cert},
                                                                    {"tls-key", &tls_key},
                                                                    {"token", &token}};
  std::string timeout_text;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string* target = nullptr;
    std::string value;
    bool has_value = false;
    if (rest.empty() && a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (name == "timeout") target = &timeout_text;
      for (const auto& [flag, dest] : global) {
        if (name == flag) target = dest;
      }
      if (target != nullptr && eq != std::string::npos) {
        value = a.substr(eq + 1);
        has_value = true;
      } else if (target != nullptr && i + 1 < argc) {
        value = argv[++i];
        has_value = true;
      }
    }
    if (target != nullptr && has_value) {
      *target = value;
      if (target == &timeout_text && !absl::SimpleAtod(value, &timeout_s)) {
        return Usage("--timeout takes seconds");
      }
    } else if (rest.empty() && (a == "-h" || a == "--help" || a == "help")) {
      std::cout << kUsage;
      return 0;
    } else {
      rest.push_back(a);
    }
  }
  if (rest.empty()) return Usage("no command");
  const std::string command = rest[0];
  Args args = ParseArgs({rest.begin() + 1, rest.end()}, {"no-autodiff"});

  tc::ClientOptions options;
  options.call_timeout_ms = static_cast<int64_t>(timeout_s * 1000);
  options.auth_token = token;
  if (tls_cert.empty() != tls_key.empty()) return Usage("--tls-cert and --tls-key go together");
  const std::vector<std::pair<const std::string*, std::string*>> pems = {
      {&tls_ca, &options.root_certificates},
      {&tls_cert, &options.client_certificate_chain},
      {&tls_key, &options.client_private_key}};
  for (const auto& [path, dest] : pems) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> pem = tc::ReadPemFile(*path);
    if (!pem.ok()) return Fail(pem.status());
    *dest = *std::move(pem);
  }
  if (command == "health") {
    // A container health check must answer, not hang on an unreachable server.
    if (options.call_timeout_ms == 0) options.call_timeout_ms = 5000;
  }
  absl::StatusOr<tc::Client> client = tc::Client::Connect(address, options);
  if (!client.ok()) return Fail(client.status());

  if (command == "devices") return Devices(*client);
  if (command == "ops") return Ops(*client);
  if (command == "health") return Health(*client);
  if (command == "session") return SessionCommand(*client, args);
  if (command == "put") return Put(*client, args);
  if (command == "get") return Get(*client, args);
  if (command == "roundtrip") return Roundtrip(*client, args);
  if (command == "demo") return Demo(*client, args);
  return Usage(absl::StrCat("unknown command '", command, "'"));
}
