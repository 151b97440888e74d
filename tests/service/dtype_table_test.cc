// The server's core and the C++ client read their dtypes from one table
// (common/dtype_table.h): both must agree, dtype by dtype, on the name, the element size and
// the wire number, and each must map its C++ element types to the same entry.
#include "common/dtype_table.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "server/core/dtype.h"
#include "server/service/convert.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

TEST(DTypeTableTest, ServerAndClientAgreeOnEveryDtype) {
  for (int i = 0; i < dtype_table::kCount; ++i) {
    const DType server = static_cast<DType>(i);
    const v1::DType wire = DTypeToProto(server);
    absl::StatusOr<tc::DType> client = tc::DTypeFromProto(wire);
    ASSERT_TRUE(client.ok()) << client.status();
    SCOPED_TRACE(DTypeName(server));
    EXPECT_EQ(std::string(DTypeName(server)), tc::DTypeName(*client));
    EXPECT_EQ(DTypeSize(server), tc::DTypeSize(*client));
    EXPECT_EQ(tc::ToProto(*client), wire);
    absl::StatusOr<DType> back = DTypeFromProto(wire, "dtype");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, server);
  }
}

TEST(DTypeTableTest, NamesAndAliasesParseToTheirEntry) {
  for (int i = 0; i < dtype_table::kCount; ++i) {
    const dtype_table::Entry& entry = dtype_table::kEntries[i];
    absl::StatusOr<DType> named = ParseDType(std::string(entry.name));
    ASSERT_TRUE(named.ok()) << named.status();
    EXPECT_EQ(*named, static_cast<DType>(i));
    for (std::string_view alias : entry.aliases) {
      if (alias.empty()) continue;
      absl::StatusOr<DType> aliased = ParseDType(std::string(alias));
      ASSERT_TRUE(aliased.ok()) << alias;
      EXPECT_EQ(*aliased, static_cast<DType>(i)) << alias;
    }
  }
  EXPECT_FALSE(ParseDType("").ok());
  EXPECT_FALSE(ParseDType("complex64").ok());
}

TEST(DTypeTableTest, ElementTypesMapToTheSameEntry) {
  EXPECT_EQ(DTypeOf<float>::value, DType::kF32);
  EXPECT_EQ(DTypeOf<double>::value, DType::kF64);
  EXPECT_EQ(DTypeOf<int32_t>::value, DType::kI32);
  EXPECT_EQ(DTypeOf<int64_t>::value, DType::kI64);
  EXPECT_EQ(DTypeOf<bool>::value, DType::kBool);
  EXPECT_EQ(tc::DTypeOf<float>::value, tc::DType::kF32);
  EXPECT_EQ(tc::DTypeOf<double>::value, tc::DType::kF64);
  EXPECT_EQ(tc::DTypeOf<int32_t>::value, tc::DType::kI32);
  EXPECT_EQ(tc::DTypeOf<int64_t>::value, tc::DType::kI64);
  EXPECT_EQ(tc::DTypeOf<bool>::value, tc::DType::kBool);
}

TEST(DTypeTableTest, ValuesOutsideTheTableAreRefused) {
  EXPECT_FALSE(DTypeFromProto(0, "dtype").ok());
  EXPECT_FALSE(DTypeFromProto(dtype_table::kCount + 1, "dtype").ok());
  EXPECT_FALSE(tc::DTypeFromProto(v1::DTYPE_UNSPECIFIED).ok());
  EXPECT_FALSE(tc::DTypeFromProto(static_cast<v1::DType>(dtype_table::kCount + 1)).ok());
  EXPECT_EQ(DTypeName(static_cast<DType>(dtype_table::kCount)), "?");
  EXPECT_EQ(tc::DTypeName(static_cast<tc::DType>(0)), "dtype(0)");
  EXPECT_EQ(tc::DTypeSize(static_cast<tc::DType>(0)), 0u);
}

}  // namespace
}  // namespace tensord::service_test
