#include "server/backends/gpu/codegen/creation_source.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tensord::gpu {
namespace {

// Every kernel here takes or computes doubles (arange's start and step, the uniforms).
std::string Head(const Dialect& d, const std::string& name, DType dtype, const std::string& args) {
  return absl::StrCat(Preamble(d, {dtype, DType::kF64}), d.kernel, " ", name, "(", d.global, " ",
                      StorageType(d, dtype), "* out, ", args, ") {\n  const ", d.int64,
                      " i = ", d.global_id, ";\n  if (i >= n) return;\n");
}

// ops::StreamValue in the dialect.
constexpr char kStream[] =
    "U64 td_stream(const U64 start, const U64 k) {\n"
    "  U64 z = start + k * 0x9E3779B97F4A7C15UL;\n"
    "  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;\n"
    "  z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;\n"
    "  return z ^ (z >> 31);\n"
    "}\n"
    "double td_uniform(const U64 start, const U64 k) {\n"
    "  return (double)(td_stream(start, k) >> 11) * 0x1p-53;\n"
    "}\n";

// The stream helpers, for the kernel source `s` (they go before its kernel).
void InsertStreamHelpers(const Dialect& d, std::string& s) {
  s.insert(s.find(d.kernel), absl::StrReplaceAll(kStream, {{"U64", d.uint64}}));
}

}  // namespace

std::string RenderArange(const Dialect& d, const std::string& name, DType dtype) {
  const std::string L = d.int64;
  std::string s =
      Head(d, name, dtype,
           absl::StrCat("const ", L, " n, const double start, const double step, const ", L,
                        " start_int, const ", L, " step_int"));
  absl::StrAppend(
      &s, "  out[i] = ",
      Store(d, dtype, IsFloat(dtype) ? "start + step * (double)i" : "start_int + step_int * i"),
      ";\n}\n");
  return s;
}

std::string RenderEye(const Dialect& d, const std::string& name, DType dtype) {
  const std::string L = d.int64;
  std::string s = Head(d, name, dtype, absl::StrCat("const ", L, " n, const ", L, " cols"));
  absl::StrAppend(&s, "  out[i] = ", Store(d, dtype, "i / cols == i % cols ? 1 : 0"), ";\n}\n");
  return s;
}

std::string RenderStream(const Dialect& d, const std::string& name, DType dtype, Stream what) {
  const std::string L = d.int64, S = StorageType(d, dtype);
  std::string args = absl::StrCat("const ", L, " n, const ", d.uint64,
                                  " start, const double p, const ", S, " scale");
  if (what == Stream::kDropout) args = absl::StrCat(d.global, " const ", S, "* x, ", args);
  std::string s = Head(d, name, dtype, args);
  InsertStreamHelpers(d, s);
  switch (what) {
    case Stream::kUniform:
      absl::StrAppend(&s, dtype == DType::kF32
                              ? "  out[i] = (float)(td_stream(start, i + 1) >> 40) * 0x1p-24f;\n"
                              : "  out[i] = td_uniform(start, i + 1);\n");
      break;
    case Stream::kNormal:
      absl::StrAppend(
          &s, "  const ", d.uint64, " k = (", d.uint64,
          ")(i / 2);\n  const double u1 = 1.0 - td_uniform(start, 2 * k + 1);\n"
          "  const double u2 = td_uniform(start, 2 * k + 2);\n"
          "  const double r = sqrt(-2.0 * log(u1));\n"
          "  out[i] = (",
          S,
          ")(i % 2 == 0 ? r * cos(6.283185307179586 * u2) : r * sin(6.283185307179586 * u2));\n");
      break;
    case Stream::kDropout:
      // Multiplying (rather than selecting) keeps NaN * 0 = NaN for dropped NaNs.
      absl::StrAppend(&s, "  out[i] = x[i] * (td_uniform(start, i + 1) >= p ? scale : (", S,
                      ")0);\n");
      break;
  }
  absl::StrAppend(&s, "}\n");
  return s;
}

std::string RenderRandint(const Dialect& d, const std::string& name, DType dtype) {
  const std::string L = d.int64, U = d.uint64;
  std::string s = Head(d, name, dtype,
                       absl::StrCat("const ", L, " n, const ", U, " start, const ", L,
                                    " low, const ", U, " range, const ", U, " reject_below"));
  InsertStreamHelpers(d, s);
  absl::StrAppend(&s, "  const ", U, " k = (", U, ")i + 1;\n  ", U, " x = td_stream(start, k);\n",
                  "  for (", U, " attempt = 1; x < reject_below; ++attempt) {\n",
                  "    x = td_stream(td_stream(start + attempt, 0), k);\n  }\n", "  out[i] = ",
                  Store(d, dtype, absl::StrCat("(", L, ")((", U, ")low + x % range)")), ";\n}\n");
  return s;
}

}  // namespace tensord::gpu
