#include "server/ops/index_checks.h"

#include <algorithm>

namespace tensord::ops {

std::vector<int64_t> IndexValues(const Tensor& index) {
  std::vector<int64_t> out(index.numel());
  for (int64_t i = 0, n = index.numel(); i < n; ++i) {
    out[i] = index.dtype() == DType::kI32 ? index.data<int32_t>()[i] : index.data<int64_t>()[i];
  }
  return out;
}

absl::Status CheckIndexRange(const std::string& op, const std::vector<int64_t>& values, int64_t dim,
                             int64_t size) {
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t v = values[i];
    if (v < 0 || v >= size) {
      return Error(Reason::kIndexOutOfRange,
                   absl::StrCat(op, ": index ", v, " (at position ", i,
                                ") is out of range for dim ", dim, " of size ", size),
                   {{"op", op},
                    {"index", absl::StrCat(v)},
                    {"position", absl::StrCat(i)},
                    {"dim", absl::StrCat(dim)},
                    {"size", absl::StrCat(size)}});
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEmbeddingIndices(const std::string& op, const std::vector<int64_t>& values,
                                   int64_t count) {
  for (int64_t k : values) {
    if (k < 0 || k >= count) {
      return Error(Reason::kIndexOutOfRange,
                   absl::StrCat(op, ": index ", k, " is out of range for ", count, " embeddings"),
                   {{"op", op}, {"index", absl::StrCat(k)}, {"size", absl::StrCat(count)}});
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> OneHotClasses(const std::vector<int64_t>& values, int64_t num_classes,
                                      int64_t rank) {
  int64_t max = -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) {
      return Error(
          Reason::kIndexOutOfRange,
          absl::StrCat("one_hot: class value ", values[i], " (at position ", i,
                       ") is negative; class values must be in [0, num_classes)"),
          {{"op", "one_hot"}, {"index", absl::StrCat(values[i])}, {"position", absl::StrCat(i)}});
    }
    max = std::max(max, values[i]);
  }
  const int64_t classes = num_classes == -1 ? max + 1 : num_classes;
  if (max >= classes) RETURN_IF_ERROR(CheckIndexRange("one_hot", values, rank, classes));
  return classes;
}

absl::StatusOr<Tensor> ScatterValueTensor(const std::string& op, const Tensor& value, DType dtype) {
  absl::StatusOr<Tensor> out;
  TENSORD_DISPATCH_ALL(dtype, [&] {
    absl::StatusOr<T> v = ScatterValueAs<T>(op, value, dtype);
    if (v.ok()) {
      out = Tensor::Scalar<T>(*v);
    } else {
      out = v.status();
    }
  });
  return out;
}

}  // namespace tensord::ops
