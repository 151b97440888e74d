// HostTensor and its .npy reading and writing (no server involved).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The preamble np.save (numpy 1.24) writes for np.arange(6, dtype=np.float32).reshape(2, 3).
const char kNumpyF32x2x3Header[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    "                                                          \n";

std::string Preamble(const std::string& header_dict, int major = 1) {
  std::string h = header_dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  if (major == 1) {
    out += static_cast<char>(h.size() & 0xff);
    out += static_cast<char>(h.size() >> 8);
  } else {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  }
  return out + h;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(HostTensorTest, TypedConstructionAndAccess) {
  tc::HostTensor f(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(f.dtype(), tc::DType::kF32);
  EXPECT_EQ(f.shape(), (tc::Shape{2, 3}));
  EXPECT_EQ(f.numel(), 6);
  EXPECT_EQ(f.nbytes(), 24u);
  EXPECT_OK(f.Validate());
  EXPECT_THAT(*f.ToVector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(f.data<float>()[4], 5.0f);
  EXPECT_EQ(f.data<double>(), nullptr);
  EXPECT_EQ(tc::ReasonOf(f.ToVector<int32_t>().status()), v1::DTYPE_MISMATCH);
  tc::HostTensor b(std::vector<bool>{true, false, true});
  EXPECT_EQ(b.bytes(), std::string("\x01\x00\x01", 3));
  EXPECT_THAT(*b.ToVector<bool>(), ElementsAre(true, false, true));
  EXPECT_THAT(b.ToDoubles(), ElementsAre(1, 0, 1));
  tc::HostTensor s = tc::HostTensor::Scalar(int64_t{-7});
  EXPECT_EQ(s.shape(), tc::Shape{});
  EXPECT_EQ(s.numel(), 1);
  EXPECT_THAT(s.ToDoubles(), ElementsAre(-7));
  tc::HostTensor wrong(std::vector<float>{1, 2, 3}, {2, 2});
  EXPECT_EQ(tc::ReasonOf(wrong.Validate()), v1::BAD_TENSOR_DATA);
  EXPECT_EQ(tc::HostTensor::Zeros(tc::DType::kI64, {3, 0}).nbytes(), 0u);
}

TEST(HostTensorTest, NarrowIntegerDtypes) {
  tc::HostTensor u(std::vector<uint8_t>{0, 1, 128, 255}, {2, 2});
  EXPECT_EQ(u.dtype(), tc::DType::kU8);
  EXPECT_EQ(tc::DTypeName(u.dtype()), "u8");
  EXPECT_EQ(tc::ToProto(u.dtype()), v1::DTYPE_U8);
  EXPECT_EQ(u.nbytes(), 4u);
  EXPECT_OK(u.Validate());
  EXPECT_EQ(u.bytes(), std::string("\x00\x01\x80\xff", 4));
  EXPECT_THAT(*u.ToVector<uint8_t>(), ElementsAre(0, 1, 128, 255));
  EXPECT_EQ(u.data<uint8_t>()[3], 255);
  EXPECT_EQ(u.data<int8_t>(), nullptr);
  EXPECT_EQ(tc::ReasonOf(u.ToVector<int8_t>().status()), v1::DTYPE_MISMATCH);
  EXPECT_EQ(tc::ReasonOf(u.ToVector<bool>().status()), v1::DTYPE_MISMATCH);
  EXPECT_THAT(u.ToDoubles(), ElementsAre(0, 1, 128, 255));
  EXPECT_EQ(tc::ReasonOf(u.ToFloats().status()), v1::DTYPE_MISMATCH);
  ASSERT_OK_AND_ASSIGN(tc::HostTensor u_back, tc::HostTensor::FromProto(u.ToProto()));
  EXPECT_EQ(u_back, u);
  tc::HostTensor i8(std::vector<int8_t>{-128, -1, 0, 127});
  EXPECT_EQ(i8.dtype(), tc::DType::kI8);
  EXPECT_EQ(i8.shape(), tc::Shape{4});
  EXPECT_THAT(i8.ToDoubles(), ElementsAre(-128, -1, 0, 127));
  tc::HostTensor i16(std::vector<int16_t>{-32768, -2, 300, 32767});
  EXPECT_EQ(i16.dtype(), tc::DType::kI16);
  EXPECT_EQ(tc::DTypeSize(i16.dtype()), 2u);
  EXPECT_EQ(i16.nbytes(), 8u);
  EXPECT_THAT(*i16.ToVector<int16_t>(), ElementsAre(-32768, -2, 300, 32767));
  EXPECT_THAT(i16.ToDoubles(), ElementsAre(-32768, -2, 300, 32767));
  EXPECT_EQ(tc::HostTensor::Scalar(uint8_t{200}).dtype(), tc::DType::kU8);
  EXPECT_EQ(tc::HostTensor::Scalar(int8_t{-3}).dtype(), tc::DType::kI8);
  EXPECT_EQ(tc::HostTensor::Scalar(int16_t{-3}).shape(), tc::Shape{});
  EXPECT_EQ(tc::HostTensor::Zeros(tc::DType::kI16, {3}).nbytes(), 6u);
  EXPECT_EQ(tc::ReasonOf(tc::HostTensor::FromFloats({1}, {1}, tc::DType::kU8).status()),
            v1::DTYPE_MISMATCH);
  EXPECT_EQ(tc::ReasonOf(tc::HostTensor(tc::DType::kI16, {2}, std::string(3, '\0')).Validate()),
            v1::BAD_TENSOR_DATA);
}

TEST(NpyTest, WritesWhatNumpyWrites) {
  tc::HostTensor t(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3});
  std::string npy = t.ToNpy();
  const std::string header(kNumpyF32x2x3Header, sizeof(kNumpyF32x2x3Header) - 1);
  ASSERT_EQ(header.size(), 128u);
  EXPECT_EQ(npy, header + t.bytes());
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ParseNpy(npy));
  EXPECT_EQ(back, t);
}

TEST(NpyTest, RoundTripsEveryDtypeAndShape) {
  const std::vector<tc::HostTensor> values = {
      tc::HostTensor(std::vector<double>{1.5, -2.5}),
      tc::HostTensor(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {3, 1, 2}),
      tc::HostTensor(std::vector<int64_t>{int64_t{1} << 50}),
      tc::HostTensor(std::vector<bool>{false, true}),
      tc::HostTensor(std::vector<uint8_t>{0, 7, 128, 255}, {2, 2}),
      tc::HostTensor(std::vector<int8_t>{-128, -1, 0, 127}),
      tc::HostTensor(std::vector<int16_t>{-32768, -1, 256, 32767}, {2, 1, 2}),
      tc::HostTensor::Scalar(int16_t{-5}),
      tc::HostTensor::Zeros(tc::DType::kU8, {0}),
      tc::HostTensor::Scalar(3.0),
      tc::HostTensor::Zeros(tc::DType::kF32, {0, 4}),
  };
  for (const tc::HostTensor& t : values) {
    ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ParseNpy(t.ToNpy()));
    EXPECT_EQ(back, t) << tc::DTypeName(t.dtype()) << tc::ShapeString(t.shape());
    EXPECT_EQ(t.ToNpy().size() % 64, t.nbytes() % 64) << "data starts 64-byte aligned";
  }
}

// The preambles np.save writes for the narrow integer dtypes: numpy marks the one-byte ones
// '|' (no byte order).
TEST(NpyTest, NarrowIntegersUseNumpysDescr) {
  auto descr_of = [](const tc::HostTensor& t) {
    const std::string npy = t.ToNpy();
    const size_t at = npy.find("'descr': '");
    return at == std::string::npos ? std::string() : npy.substr(at + 10, 3);
  };
  EXPECT_EQ(descr_of(tc::HostTensor(std::vector<uint8_t>{1})), "|u1");
  EXPECT_EQ(descr_of(tc::HostTensor(std::vector<int8_t>{1})), "|i1");
  EXPECT_EQ(descr_of(tc::HostTensor(std::vector<int16_t>{1})), "<i2");
  // np.arange(6, dtype=np.uint8).reshape(2, 3), as np.save writes it.
  std::string u1 = Preamble("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }") +
                   std::string("\x00\x01\x02\x03\x04\xff", 6);
  ASSERT_OK_AND_ASSIGN(tc::HostTensor u, tc::HostTensor::ParseNpy(u1));
  EXPECT_EQ(u.dtype(), tc::DType::kU8);
  EXPECT_EQ(u.shape(), (tc::Shape{2, 3}));
  EXPECT_THAT(*u.ToVector<uint8_t>(), ElementsAre(0, 1, 2, 3, 4, 255));
  EXPECT_EQ(u.ToNpy(), u1) << "byte-identical to np.save";
  std::string i1 = Preamble("{'descr': '|i1', 'fortran_order': False, 'shape': (2,), }") +
                   std::string("\xff\x80", 2);
  ASSERT_OK_AND_ASSIGN(tc::HostTensor i, tc::HostTensor::ParseNpy(i1));
  EXPECT_THAT(*i.ToVector<int8_t>(), ElementsAre(-1, -128));
  // Fortran order moves 2-byte elements whole.
  std::string i2 = Preamble("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2), }") +
                   Bytes(std::vector<int16_t>{1, -300, 2, 32767});
  ASSERT_OK_AND_ASSIGN(tc::HostTensor s, tc::HostTensor::ParseNpy(i2));
  EXPECT_EQ(s.dtype(), tc::DType::kI16);
  EXPECT_THAT(*s.ToVector<int16_t>(), ElementsAre(1, 2, -300, 32767));
  // '<u2' stays bf16's bit patterns; big-endian '>i2' is refused as for other dtypes.
  ASSERT_OK_AND_ASSIGN(tc::HostTensor b,
                       tc::HostTensor::ParseNpy(
                           Preamble("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }") +
                           std::string("\x80\x3f", 2)));
  EXPECT_EQ(b.dtype(), tc::DType::kBF16);
  EXPECT_EQ(tc::ReasonOf(tc::HostTensor::ParseNpy(
                             Preamble("{'descr': '>i2', 'fortran_order': False, 'shape': (1,), }") +
                             std::string(2, '\0'))
                             .status()),
            v1::BAD_TENSOR_DATA);
}

TEST(NpyTest, ReadsVersion2AndFortranOrder) {
  std::string v2 = Preamble("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 2) +
                   Bytes(std::vector<int64_t>{0, 1, 2});
  ASSERT_OK_AND_ASSIGN(tc::HostTensor a, tc::HostTensor::ParseNpy(v2));
  EXPECT_EQ(a.shape(), tc::Shape{3});
  EXPECT_THAT(*a.ToVector<int64_t>(), ElementsAre(0, 1, 2));
  // np.asfortranarray(np.arange(6.0).reshape(2, 3)): column-major data.
  std::string fortran = Preamble("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }") +
                        Bytes(std::vector<double>{0, 3, 1, 4, 2, 5});
  ASSERT_OK_AND_ASSIGN(tc::HostTensor f, tc::HostTensor::ParseNpy(fortran));
  EXPECT_EQ(f.shape(), (tc::Shape{2, 3}));
  EXPECT_THAT(*f.ToVector<double>(), ElementsAre(0, 1, 2, 3, 4, 5));
  // Double quotes and a scalar shape.
  std::string scalar = Preamble("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": ()}") +
                       Bytes(std::vector<float>{2.5f});
  ASSERT_OK_AND_ASSIGN(tc::HostTensor s, tc::HostTensor::ParseNpy(scalar));
  EXPECT_EQ(s.shape(), tc::Shape{});
  EXPECT_THAT(*s.ToVector<float>(), ElementsAre(2.5f));
}

TEST(NpyTest, RejectsWhatItCannotRead) {
  auto reason = [](const std::string& npy) {
    return tc::ReasonOf(tc::HostTensor::ParseNpy(npy).status());
  };
  EXPECT_EQ(reason("not numpy at all"), v1::BAD_TENSOR_DATA);
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(reason(Preamble(f4) + std::string(7, '\0')), v1::BAD_TENSOR_DATA) << "short data";
  EXPECT_EQ(reason(Preamble(f4) + std::string(9, '\0')), v1::BAD_TENSOR_DATA) << "long data";
  absl::Status big_endian =
      tc::HostTensor::ParseNpy(
          Preamble("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") +
          std::string(4, '\0'))
          .status();
  EXPECT_EQ(tc::ReasonOf(big_endian), v1::BAD_TENSOR_DATA);
  EXPECT_THAT(std::string(big_endian.message()), HasSubstr("big-endian"));
  EXPECT_EQ(reason(Preamble("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }") +
                   std::string(8, '\0')),
            v1::DTYPE_MISMATCH);
  EXPECT_EQ(reason(Preamble("{'descr': '<f4', 'shape': (1,), }") + std::string(4, '\0')),
            v1::BAD_TENSOR_DATA)
      << "no fortran_order";
  std::string v9 = Preamble(f4);
  v9[6] = 9;
  EXPECT_EQ(reason(v9 + std::string(8, '\0')), v1::BAD_TENSOR_DATA);
}

TEST(NpyTest, FilesOnDisk) {
  const std::string path = ::testing::TempDir() + "/host_tensor_test.npy";
  tc::HostTensor t(std::vector<int32_t>{7, 8, 9, 10}, {2, 2});
  ASSERT_OK(t.WriteNpy(path));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor back, tc::HostTensor::ReadNpy(path));
  EXPECT_EQ(back, t);
  tc::HostTensor u(std::vector<uint8_t>{0, 255, 3});
  ASSERT_OK(u.WriteNpy(path));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor u_back, tc::HostTensor::ReadNpy(path));
  EXPECT_EQ(u_back, u);
  std::remove(path.c_str());
  absl::Status missing = tc::HostTensor::ReadNpy(path).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr(path));
}

}  // namespace
}  // namespace tensord::service_test
