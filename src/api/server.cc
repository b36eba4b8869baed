#include "api/server.h"

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace dsinfer::api {

namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

// The drain after a signal (io thread): a timer polls until no request is open, aborting them
// all at the deadline, then stops the io_context once the connections have written their replies.
class Drain {
 public:
  Drain(net::io_context* io, HttpServer* server, OpenAiService* service, double timeout_s)
      : io_(io),
        server_(server),
        service_(service),
        timer_(*io),
        deadline_(Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3))) {
  }

  void Begin() {
    std::fprintf(stderr, "dsinfer serve: draining (%lld requests in flight)\n",
                 static_cast<long long>(service_->open_calls()));
    service_->StartDrain();
    server_->StopAccepting();
    Tick();
  }

 private:
  void Tick() {
    const auto now = Clock::now();
    if (service_->open_calls() > 0 && now >= deadline_) {
      if (!aborted_) {
        std::fprintf(stderr, "dsinfer serve: drain deadline: aborting %lld requests\n",
                     static_cast<long long>(service_->open_calls()));
      }
      service_->AbortAll();  // again each tick: a request still being submitted joins later
      aborted_ = true;
    }
    if (service_->open_calls() == 0) {
      if (flush_until_ == Clock::time_point{}) flush_until_ = now + std::chrono::seconds(2);
      // Replies are queued; give the sockets a moment to write them.
      if (server_->open_connections() == 0 || now >= flush_until_) {
        io_->stop();
        return;
      }
    }
    timer_.expires_after(std::chrono::milliseconds(20));
    timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) Tick();
    });
  }

  net::io_context* io_;
  HttpServer* server_;
  OpenAiService* service_;
  net::steady_timer timer_;
  Clock::time_point deadline_;
  Clock::time_point flush_until_{};
  bool aborted_ = false;
};

}  // namespace

Status RunServer(const ServerOptions& options) {
  net::io_context io(1);
  OpenAiService service(&io, options.service);
  HttpServer server(&io, options.http, [&service](std::shared_ptr<Exchange> ex, HttpRequest req) {
    service.Handle(std::move(ex), std::move(req));
  });
  DSINFER_RETURN_IF_ERROR(server.Listen());
  std::fprintf(stderr, "dsinfer serve: listening on http://%s:%d (model %s loading)\n",
               options.http.host.c_str(), server.port(), service.model_name().c_str());
  std::fflush(stderr);

  Drain drain(&io, &server, &service, options.drain_timeout_s);
  net::signal_set signals(io, SIGTERM, SIGINT);
  bool stopping = false;
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (ec) return;
    stopping = true;
    drain.Begin();
  });
  std::thread io_thread([&io] { io.run(); });

  auto engine = Engine::Create(options.engine);
  std::unique_ptr<tokenizer::Tokenizer> tok;
  Status status = engine.ok() ? Status::Ok() : engine.status();
  if (status.ok() && (*engine)->has_tokenizer()) {
    std::string path = options.engine.tokenizer_path;
    if (path.empty()) path = options.engine.model_dir + "/tokenizer.json";
    auto loaded = tokenizer::Tokenizer::Load(path);
    if (loaded.ok()) {
      tok = std::move(loaded).value();
    } else {
      status = loaded.status();
    }
  }
  if (!status.ok()) {
    net::post(io, [&io] { io.stop(); });
    io_thread.join();
    service.JoinSubmitters();
    return status;
  }
  Engine* e = engine->get();
  net::post(io, [&service, &tok, e, &stopping] {
    service.SetEngine(e, std::move(tok));
    if (!stopping)
      std::fprintf(stderr, "dsinfer serve: ready (%s on %s; %s)\n", e->model_family().c_str(),
                   e->device().c_str(), e->MemoryPlanDescription().c_str());
    std::fflush(stderr);
  });
  io_thread.join();
  service.JoinSubmitters();
  // The engine first: its last events still post to the (stopped, alive) io_context.
  engine->reset();
  std::fprintf(stderr, "dsinfer serve: stopped\n");
  return Status::Ok();
}

}  // namespace dsinfer::api
