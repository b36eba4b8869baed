#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace dsinfer::io {

using json = nlohmann::json;

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  TensorView v;
  v.shape = shape;
  return v.ShapeString();
}

}  // namespace

StatusOr<std::map<std::string, TensorView>> ParseSafetensors(const uint8_t* bytes, size_t size,
                                                             const std::string& path) {
  if (size < 8) {
    return DataLoss(path + ": truncated safetensors file (" + std::to_string(size) +
                    " bytes, need at least 8)");
  }
  std::map<std::string, TensorView> tensors;
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian host assumed (x86-64, aarch64)
  if (header_len > size - 8) {
    return DataLoss(path + ": safetensors header length " + std::to_string(header_len) +
                    " runs past the end of the file (" + std::to_string(size) + " bytes)");
  }
  json header = json::parse(bytes + 8, bytes + 8 + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return DataLoss(path + ": safetensors header is not a valid JSON object");
  }
  const uint8_t* data = bytes + 8 + header_len;
  const size_t data_size = size - 8 - header_len;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path + ": tensor '" + name + "'";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets") || !info["dtype"].is_string() ||
        !info["shape"].is_array() || !info["data_offsets"].is_array() ||
        info["data_offsets"].size() != 2) {
      return DataLoss(where + " has a malformed header entry");
    }
    auto dtype = DTypeFromName(info["dtype"].get<std::string>());
    if (!dtype) return DataLoss(where + " has unknown dtype " + info["dtype"].get<std::string>());
    TensorView view;
    view.name = name;
    view.dtype = *dtype;
    for (auto& d : info["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return DataLoss(where + " has a bad shape");
      view.shape.push_back(d.get<int64_t>());
    }
    const auto& off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return DataLoss(where + " has bad data_offsets");
    }
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return DataLoss(where + " data [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") lies outside the data section (" + std::to_string(data_size) +
                      " bytes): file truncated?");
    }
    uint64_t expect = DTypeSize(view.dtype);  // bytes of the shape, refusing an overflow
    for (int64_t d : view.shape) {
      if (__builtin_mul_overflow(expect, static_cast<uint64_t>(d), &expect)) {
        return DataLoss(where + " has a shape too large to address: " + view.ShapeString());
      }
    }
    if (end - begin != expect) {
      return DataLoss(where + " holds " + std::to_string(end - begin) + " bytes but " +
                      std::string(DTypeName(view.dtype)) + view.ShapeString() + " needs " +
                      std::to_string(expect));
    }
    view.data = data + begin;
    view.nbytes = end - begin;
    tensors.emplace(name, std::move(view));
  }
  return tensors;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return NotFound("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Internal("cannot stat " + path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return DataLoss(path + ": truncated safetensors file (" + std::to_string(size) +
                    " bytes, need at least 8)");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Internal("cannot mmap " + path);
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = size;

  DSINFER_ASSIGN_OR_RETURN(file->tensors_,
                           ParseSafetensors(static_cast<const uint8_t*>(map), size, path));
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

std::string NormalizeTensorName(const std::string& name) {
  static const std::string kPrefix = "model.";
  std::string n = name.rfind(kPrefix, 0) == 0 ? name.substr(kPrefix.size()) : name;
  // Spellings that transformers' save_pretrained leaves un-renamed (its reverse conversion mapping
  // is partial): map them onto the official names of spec §4.2.
  static const std::pair<const char*, const char*> kWhole[] = {
      {"embed_tokens.weight", "embed.weight"},   {"lm_head.weight", "head.weight"},
      {"hc_head.hc_fn", "hc_head_fn"},           {"hc_head.hc_base", "hc_head_base"},
      {"hc_head.hc_scale", "hc_head_scale"},
  };
  for (const auto& [from, to] : kWhole) {
    if (n == from) return to;
  }
  // The attention's kv_norm comes back as "attn.norm" (its rule is shared with compressor.norm).
  static const std::string kAttnNorm = ".attn.norm.weight";
  if (n.size() > kAttnNorm.size() && n.compare(n.size() - kAttnNorm.size(), kAttnNorm.size(), kAttnNorm) == 0) {
    return n.substr(0, n.size() - kAttnNorm.size()) + ".attn.kv_norm.weight";
  }
  return n;
}

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("model dir " + dir + " does not exist");
  auto ckpt = std::make_unique<Checkpoint>();
  ckpt->dir_ = dir;
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> weight_map;  // normalized name -> shard
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index_path, ec)) {
    std::ifstream in(index_path);
    json index = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
        !index["weight_map"].is_object()) {
      return DataLoss(index_path.string() + ": not a valid safetensors index (needs weight_map)");
    }
    for (auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) return DataLoss(index_path.string() + ": bad shard for " + name);
      weight_map[NormalizeTensorName(name)] = shard.get<std::string>();
      if (std::find(shard_names.begin(), shard_names.end(), shard.get<std::string>()) ==
          shard_names.end()) {
        shard_names.push_back(shard.get<std::string>());
      }
    }
  } else {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".safetensors") shard_names.push_back(entry.path().filename());
    }
    std::sort(shard_names.begin(), shard_names.end());
  }
  if (shard_names.empty()) return NotFound("no *.safetensors files in " + dir);
  for (const auto& shard : shard_names) {
    DSINFER_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((fs::path(dir) / shard).string()));
    for (const auto& [name, view] : file->tensors()) {
      std::string key = NormalizeTensorName(name);
      if (ckpt->by_name_.count(key)) {
        return DataLoss("tensor " + key + " appears twice in " + dir);
      }
      ckpt->by_name_[key] = &view;
    }
    ckpt->files_.push_back(std::move(file));
  }
  for (const auto& [name, shard] : weight_map) {
    if (!ckpt->by_name_.count(name)) {
      return DataLoss("index lists tensor " + name + " in " + shard + " but the shard lacks it");
    }
  }
  return ckpt;
}

const TensorView* Checkpoint::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

StatusOr<const TensorView*> Checkpoint::Get(const std::string& name) const {
  const TensorView* v = Find(name);
  if (!v) return NotFound("missing tensor '" + name + "' in checkpoint " + dir_);
  return v;
}

StatusOr<const TensorView*> Checkpoint::GetChecked(const std::string& name,
                                                   const std::vector<int64_t>& shape) const {
  DSINFER_ASSIGN_OR_RETURN(const TensorView* v, Get(name));
  if (v->shape != shape) {
    return DataLoss("tensor '" + name + "' has shape " + v->ShapeString() + ", expected " +
                    ShapeString(shape));
  }
  return v;
}

void SafetensorsWriter::Add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  entries_[name] = Entry{dtype, std::move(shape), std::move(bytes)};
}

void SafetensorsWriter::AddF32(const std::string& name, std::vector<int64_t> shape,
                               const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());  // (null when empty)
  Add(name, DType::kF32, std::move(shape), std::move(bytes));
}

size_t SafetensorsWriter::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, e] : entries_) n += e.bytes.size();
  return n;
}

Status SafetensorsWriter::Write(const std::string& path) const {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& [name, e] : entries_) {
    header[name] = {{"dtype", std::string(DTypeName(e.dtype))},
                    {"shape", e.shape},
                    {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) return Internal("cannot write " + path);
  uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, e] : entries_) {
    out.write(reinterpret_cast<const char*>(e.bytes.data()),
              static_cast<std::streamsize>(e.bytes.size()));
  }
  if (!out) return Internal("write failed: " + path);
  return Status::Ok();
}

}  // namespace dsinfer::io
