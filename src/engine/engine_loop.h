// EngineLoop: the engine thread around an EngineCore. Submit/Abort/Stats may be called from any
// thread: Submit prepares the request on the caller's thread and queues it; the engine thread
// drains the queues between steps, runs steps while there is work, and routes each event to its
// request's stream. Destruction aborts what is left and joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dsinfer/engine.h"
#include "engine/engine_core.h"

namespace dsinfer::engine {

// The events of one request, filled by the engine thread and read by one consumer.
class EventQueue final : public RequestStream {
 public:
  EventQueue(uint64_t id, int completions) : id_(id), open_(completions) {}
  uint64_t id() const override { return id_; }
  bool Next(StreamEvent* event) override;
  bool TryNext(StreamEvent* event) override;
  void SetNotify(std::function<void()> notify) override;
  // Engine thread. Returns true when this was the last event of the last completion.
  bool Push(StreamEvent event);

 private:
  const uint64_t id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::function<void()> notify_;  // called outside mu_ (it may post work that calls TryNext)
  int open_;  // completions without their final event yet (pushed side)
};

class EngineLoop {
 public:
  explicit EngineLoop(std::unique_ptr<EngineCore> core);
  ~EngineLoop();

  StatusOr<std::shared_ptr<RequestStream>> Submit(const GenerateRequest& request);
  void Abort(uint64_t id);
  EngineStats Stats() const;
  const EngineCore& core() const { return *core_; }

 private:
  struct Pending {
    uint64_t id = 0;
    PreparedRequest request;
    std::shared_ptr<EventQueue> stream;
  };
  void Run();

  std::unique_ptr<EngineCore> core_;
  std::atomic<uint64_t> next_id_{1};
  mutable std::mutex mu_;  // guards inbox_, aborts_, stop_, stats_
  std::condition_variable cv_;
  std::vector<Pending> inbox_;
  std::vector<uint64_t> aborts_;
  bool stop_ = false;
  EngineStats stats_;
  std::unordered_map<uint64_t, std::shared_ptr<EventQueue>> streams_;  // engine thread only
  std::thread thread_;
};

}  // namespace dsinfer::engine
