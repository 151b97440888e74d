// The element types of tensord, as one table that the server's core (server/core/dtype.h) and
// the C++ client (client/cpp/host_tensor.h) both read: names, accepted spellings, element
// sizes, wire numbers and C++ element types are written here once, so the two sides cannot
// drift apart. Header-only and free of dependencies (no proto, no abseil): the client links no
// server code, and the server's core no gRPC.
//
// Each side keeps its own enum, numbered for its own use: the server's DType counts from 0
// (DTypeSet bit positions, kernel dispatch), the client's takes the tensord.v1.DType numbers (it
// converts to and from the proto with a cast). Both list the dtypes in this table's order, so a
// value of either is a position in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tensord::dtype_table {

struct Entry {
  std::string_view name;  // the short name, as errors and ListOps print it: "f32"
  size_t size;            // bytes per element
  // PyTorch and numpy spellings accepted besides the name (dtype attributes); empty ones pad.
  std::string_view aliases[3];
};

// In tensord.v1.DType order: entry i has wire number i + 1 (0 is DTYPE_UNSPECIFIED). After the
// five compute dtypes come the storage dtypes: bf16 and f16 (computed in f32), then u8, i8 and
// i16 (computed in i32).
inline constexpr Entry kEntries[] = {
    {"f32", 4, {"float32", "float"}},
    {"f64", 8, {"float64", "double"}},
    {"i32", 4, {"int32", "int"}},
    {"i64", 8, {"int64", "long"}},
    {"bool", 1, {"b8"}},
    {"bf16", 2, {"bfloat16"}},
    {"f16", 2, {"float16", "half"}},
    {"u8", 1, {"uint8"}},
    {"i8", 1, {"int8"}},
    {"i16", 2, {"int16", "short"}},
};
inline constexpr int kCount = static_cast<int>(sizeof(kEntries) / sizeof(kEntries[0]));

// The entry at `index`, or null outside the table (an enum value cast from unchecked data).
constexpr const Entry* At(int index) {
  return index >= 0 && index < kCount ? &kEntries[index] : nullptr;
}

// The wire number of entry `index`, and the entry index of a wire number: -1 for
// DTYPE_UNSPECIFIED and for numbers this build does not know.
constexpr int WireNumber(int index) { return index + 1; }
constexpr int IndexOfWireNumber(int number) {
  return number >= 1 && number <= kCount ? number - 1 : -1;
}

// The entry index of a name or alias; -1 when none matches.
constexpr int IndexOfName(std::string_view name) {
  for (int i = 0; i < kCount; ++i) {
    if (kEntries[i].name == name) return i;
    for (std::string_view alias : kEntries[i].aliases) {
      if (!alias.empty() && alias == name) return i;
    }
  }
  return -1;
}

// The entry index of the C++ element type T. bf16 and f16 have none: tensors of them hold
// 16-bit patterns, converted with server/core/half.h.
template <typename T>
constexpr int IndexOfType() {
  if constexpr (std::is_same_v<T, float>) {
    return 0;
  } else if constexpr (std::is_same_v<T, double>) {
    return 1;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return 2;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return 3;
  } else if constexpr (std::is_same_v<T, bool>) {  // one byte, 0 or 1
    return 4;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return 7;
  } else if constexpr (std::is_same_v<T, int8_t>) {
    return 8;
  } else if constexpr (std::is_same_v<T, int16_t>) {
    return 9;
  } else {
    static_assert(!std::is_same_v<T, T>, "no tensord dtype has this C++ element type");
    return -1;
  }
}

}  // namespace tensord::dtype_table
