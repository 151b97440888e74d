#include "server/distributed/collective_agreement.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensord::distributed {
namespace {

constexpr char kMagic[4] = {'T', 'D', 'C', '2'};
constexpr size_t kMaxDims = 64;
constexpr size_t kMaxMessage = 900;
constexpr size_t kMaxField = 120;

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void I64(int64_t v) { Raw(&v, sizeof v); }
  // Fits `s` into what is left (keeping room for `reserve` bytes after it).
  void Str(absl::string_view s, size_t max, size_t reserve = 0) {
    size_t room = kStatementBytes - out_.size();
    room = room > reserve + 4 ? room - reserve - 4 : 0;
    s = s.substr(0, std::min({s.size(), max, room}));
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  size_t left() const { return kStatementBytes - out_.size(); }

 private:
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& out_;
};

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  bool U32(uint32_t& v) { return Raw(&v, sizeof v); }
  bool I64(int64_t& v) { return Raw(&v, sizeof v); }
  bool Str(std::string& s) {
    uint32_t n = 0;
    if (!U32(n) || n > in_.size() - pos_) return false;
    s = std::string(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }

 private:
  bool Raw(void* p, size_t n) {
    if (in_.size() - pos_ < n) return false;
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  absl::string_view in_;
  size_t pos_ = 0;
};

std::string Describe(const CollectiveStatement& s) {
  return absl::StrCat(s.op, "(", s.attrs, ") on ", DTypeName(s.dtype), ShapeToString(s.shape));
}

}  // namespace

CollectiveStatement Refusal(const std::string& op, const std::string& device,
                            const absl::Status& status) {
  CollectiveStatement s;
  s.op = op;
  s.device = device;
  s.refusal = GetReason(status);
  if (s.refusal == Reason::kUnspecified) s.refusal = Reason::kInternal;
  s.message = std::string(status.message());
  s.metadata = GetMetadata(status);
  return s;
}

std::string Encode(const CollectiveStatement& s) {
  std::string out;
  out.reserve(kStatementBytes);
  out.append(kMagic, sizeof kMagic);
  Writer w(out);
  w.U32(static_cast<uint32_t>(s.refusal));
  w.U32(static_cast<uint32_t>(s.dtype));
  w.U32(s.new_communicator ? 1 : 0);
  const size_t dims = std::min(s.shape.size(), kMaxDims);
  w.U32(static_cast<uint32_t>(dims));
  for (size_t i = 0; i < dims; ++i) w.I64(s.shape[i]);
  w.Str(s.op, kMaxField);
  w.Str(s.attrs, 4 * kMaxField);
  w.Str(s.device, kMaxField);
  w.Str(s.library, kMaxField);
  w.Str(s.message, kMaxMessage, /*reserve=*/4);
  // As many metadata entries as fit, each with its 8 bytes of lengths.
  std::vector<std::pair<absl::string_view, absl::string_view>> entries;
  size_t room = w.left() - 4;
  for (const auto& [k, v] : s.metadata) {
    size_t need = 8 + std::min(k.size(), kMaxField) + std::min(v.size(), kMaxField);
    if (need > room) break;
    room -= need;
    entries.emplace_back(k, v);
  }
  w.U32(static_cast<uint32_t>(entries.size()));
  for (const auto& [k, v] : entries) {
    w.Str(k, kMaxField);
    w.Str(v, kMaxField);
  }
  out.resize(kStatementBytes, '\0');
  return out;
}

absl::StatusOr<CollectiveStatement> Decode(absl::string_view bytes) {
  const auto bad = [] {
    return Error(Reason::kInternal,
                 "collective: a peer's statement is malformed (another tensord version?)");
  };
  if (bytes.size() != kStatementBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return bad();
  }
  Reader r(bytes.substr(sizeof kMagic));
  CollectiveStatement s;
  uint32_t reason = 0, dtype = 0, fresh = 0, dims = 0, entries = 0;
  if (!r.U32(reason) || !r.U32(dtype) || !r.U32(fresh) || fresh > 1 || !r.U32(dims) ||
      dims > kMaxDims) {
    return bad();
  }
  s.new_communicator = fresh == 1;
  s.refusal = static_cast<Reason>(reason);
  s.dtype = static_cast<DType>(dtype);
  if (ReasonFromName(ReasonName(s.refusal)) != s.refusal || DTypeName(s.dtype) == "?") {
    return bad();
  }
  s.shape.resize(dims);
  for (int64_t& d : s.shape) {
    if (!r.I64(d)) return bad();
  }
  if (!r.Str(s.op) || !r.Str(s.attrs) || !r.Str(s.device) || !r.Str(s.library) ||
      !r.Str(s.message) || !r.U32(entries)) {
    return bad();
  }
  for (uint32_t i = 0; i < entries; ++i) {
    std::string k, v;
    if (!r.Str(k) || !r.Str(v)) return bad();
    s.metadata[std::move(k)] = std::move(v);
  }
  return s;
}

absl::Status Agree(int rank, const std::string& group,
                   const std::vector<CollectiveStatement>& statements) {
  for (size_t r = 0; r < statements.size(); ++r) {
    const CollectiveStatement& s = statements[r];
    if (s.refusal == Reason::kUnspecified) continue;
    Metadata md = s.metadata;
    md["op"] = s.op;
    md["group"] = group;
    md["rank"] = absl::StrCat(r);
    md["device"] = s.device;
    md["local_rank"] = absl::StrCat(rank);
    return Error(s.refusal,
                 absl::StrCat(s.op, ": rank ", r, " of group '", group,
                              "' refused the collective, so no rank ran it: ", s.message),
                 md);
  }
  const CollectiveStatement& first = statements.front();
  for (size_t r = 1; r < statements.size(); ++r) {
    const CollectiveStatement& s = statements[r];
    std::string field = s.op != first.op             ? "op"
                        : s.attrs != first.attrs     ? "attrs"
                        : s.dtype != first.dtype     ? "dtype"
                        : s.shape != first.shape     ? "shape"
                        : s.library != first.library ? "library"
                                                     : "";
    if (field.empty()) continue;
    if (field == "library") {
      return Error(
          Reason::kCollectiveMismatch,
          absl::StrCat(first.op, ": the ranks of group '", group,
                       "' move the data differently: rank 0 with ", first.library, " (device ",
                       first.device, "), rank ", r, " with ", s.library, " (device ", s.device,
                       "); put every rank's tensors on devices of one kind; nothing "
                       "was sent"),
          {{"op", first.op},
           {"group", group},
           {"rank", absl::StrCat(rank)},
           {"peer_rank", absl::StrCat(r)},
           {"field", field},
           {"value", first.library},
           {"peer_value", s.library}});
    }
    return Error(Reason::kCollectiveMismatch,
                 absl::StrCat(first.op, ": the ranks of group '", group,
                              "' called different collectives: rank 0 ", Describe(first), ", rank ",
                              r, " ", Describe(s), "; nothing was sent"),
                 {{"op", first.op},
                  {"group", group},
                  {"rank", absl::StrCat(rank)},
                  {"peer_rank", absl::StrCat(r)},
                  {"field", field},
                  {"value", Describe(first)},
                  {"peer_value", Describe(s)}});
  }
  return absl::OkStatus();
}

}  // namespace tensord::distributed
