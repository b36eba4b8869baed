// Safetensors checkpoints: a memory-mapped reader with zero-copy tensor views, a multi-shard
// checkpoint (model.safetensors.index.json or every *.safetensors in a dir) and a writer.
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// then the data section; offsets are relative to the data section.
// Readers are immutable after Open and safe to share between threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace dsinfer::io {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapped file
  size_t nbytes = 0;

  int64_t numel() const;
  std::string ShapeString() const;  // "[2, 3]"
};

// The tensors of a .safetensors file held in `bytes` (views into them), every header field
// validated: DataLoss naming `path` and the tensor for anything malformed.
StatusOr<std::map<std::string, TensorView>> ParseSafetensors(const uint8_t* bytes, size_t size,
                                                             const std::string& path);

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// All shards of a model dir. Tensor names are normalized by dropping a leading "model." so that
// both the official names and save_pretrained output resolve to the same keys.
class Checkpoint {
 public:
  static StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  // nullptr when absent.
  const TensorView* Find(const std::string& name) const;
  // NotFound with the tensor name and the dir when absent.
  StatusOr<const TensorView*> Get(const std::string& name) const;
  // Get + dtype/shape validation ("wrong shape" errors name the tensor, expected and actual).
  StatusOr<const TensorView*> GetChecked(const std::string& name,
                                         const std::vector<int64_t>& shape) const;
  const std::map<std::string, const TensorView*>& tensors() const { return by_name_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> by_name_;
};

std::string NormalizeTensorName(const std::string& name);

// Builds a .safetensors file in memory and writes it.
class SafetensorsWriter {
 public:
  void Add(const std::string& name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes);
  void AddF32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v);
  Status Write(const std::string& path) const;
  size_t total_bytes() const;

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace dsinfer::io
