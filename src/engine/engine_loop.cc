#include "engine/engine_loop.h"

namespace dsinfer::engine {

bool EventQueue::Next(StreamEvent* event) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || open_ == 0; });
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool EventQueue::TryNext(StreamEvent* event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

void EventQueue::SetNotify(std::function<void()> notify) {
  bool queued = false;
  std::function<void()> call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notify_ = std::move(notify);
    queued = !events_.empty();
    call = notify_;
  }
  if (queued && call) call();
}

bool EventQueue::Push(StreamEvent event) {
  std::function<void()> call;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.finish != FinishReason::kNone) --open_;
    events_.push_back(std::move(event));
    cv_.notify_all();
    last = open_ == 0;
    call = notify_;
  }
  if (call) call();
  return last;
}

EngineLoop::EngineLoop(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {
  stats_ = core_->Stats();
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

StatusOr<std::shared_ptr<RequestStream>> EngineLoop::Submit(const GenerateRequest& request) {
  DSINFER_ASSIGN_OR_RETURN(PreparedRequest prepared, core_->Prepare(request));
  const uint64_t id = next_id_.fetch_add(1);
  auto stream = std::make_shared<EventQueue>(id, prepared.params.n);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Cancelled("the engine is shutting down");
    inbox_.push_back({id, std::move(prepared), stream});
  }
  cv_.notify_all();
  return std::shared_ptr<RequestStream>(stream);
}

void EngineLoop::Abort(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

EngineStats EngineLoop::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EngineLoop::Run() {
  std::vector<Pending> inbox;
  std::vector<uint64_t> aborts;
  std::vector<StreamEvent> events;
  for (;;) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !inbox_.empty() || !aborts_.empty() || core_->HasWork(); });
      stop = stop_;
      inbox.swap(inbox_);
      aborts.swap(aborts_);
    }
    for (auto& p : inbox) {
      streams_[p.id] = p.stream;
      core_->Add(p.id, std::move(p.request));
    }
    inbox.clear();
    for (uint64_t id : aborts) core_->Abort(id, &events);
    aborts.clear();
    if (stop) {
      std::vector<uint64_t> left;
      for (const auto& [id, s] : streams_) left.push_back(id);
      for (uint64_t id : left) core_->Abort(id, &events);
    } else {
      core_->Step(&events);
    }
    {
      // Before the events: a consumer that has seen its final event sees its stats too.
      std::lock_guard<std::mutex> lock(mu_);
      stats_ = core_->Stats();
    }
    for (auto& ev : events) {
      auto it = streams_.find(ev.request_id);
      if (it != streams_.end() && it->second->Push(std::move(ev))) streams_.erase(it);
    }
    events.clear();
    if (stop) return;
  }
}

}  // namespace dsinfer::engine
