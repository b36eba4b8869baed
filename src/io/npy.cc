#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace dsinfer::io {

Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
    n *= shape[i];
  }
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) return Internal("cannot write " + path);
  const char magic[] = "\x93NUMPY\x01\x00";
  out.write(magic, 8);
  uint16_t len = static_cast<uint16_t>(dict.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * 4));
  if (!out) return Internal("write failed: " + path);
  return Status::Ok();
}

StatusOr<NpyArray> ReadNpyF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  char head[8];
  in.read(head, 8);
  if (!in || std::memcmp(head, "\x93NUMPY", 6) != 0) return DataLoss(path + ": not an .npy file");
  uint32_t hlen = 0;
  if (head[6] == 1) {
    uint16_t l = 0;
    in.read(reinterpret_cast<char*>(&l), 2);
    hlen = l;
  } else {
    in.read(reinterpret_cast<char*>(&hlen), 4);
  }
  if (!in || hlen > (1u << 20)) return DataLoss(path + ": bad .npy header");
  std::string dict(hlen, '\0');
  in.read(dict.data(), hlen);
  if (dict.find("'<f4'") == std::string::npos || dict.find("'fortran_order': False") == std::string::npos) {
    return Unimplemented(path + ": only little-endian float32 C-order .npy is supported");
  }
  NpyArray arr;
  size_t lp = dict.find('('), rp = dict.find(')');
  if (lp == std::string::npos || rp == std::string::npos) return DataLoss(path + ": bad header");
  std::stringstream ss(dict.substr(lp + 1, rp - lp - 1));
  std::string item;
  int64_t n = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    arr.shape.push_back(std::stoll(item));
    n *= arr.shape.back();
  }
  arr.data.resize(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(arr.data.data()), n * 4);
  if (!in) return DataLoss(path + ": truncated data");
  return arr;
}

}  // namespace dsinfer::io
