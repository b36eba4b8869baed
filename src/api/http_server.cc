#include "api/http_server.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <deque>
#include <sstream>

namespace dsinfer::api {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Serialize(const http::response_header<>& header) {
  std::ostringstream os;
  os << header;
  return os.str();
}

template <typename Body>
std::string Serialize(const http::response<Body>& message) {
  std::ostringstream os;
  os << message;
  return os.str();
}

const char* kErrorJson413 =
    R"({"error": {"message": "the request body is larger than the server's limit", )"
    R"("type": "invalid_request_error", "param": null, "code": 413}})";
const char* kErrorJson400 =
    R"({"error": {"message": "malformed HTTP request", "type": "invalid_request_error", )"
    R"("param": null, "code": 400}})";

// One connection. Phases: reading a request -> handling it (the handler holds the Exchange; the
// socket is watched for a disconnect) -> writing its reply (whole, or events) -> reading again.
class Session final : public Exchange, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options, const HttpHandler& handler,
          std::shared_ptr<int64_t> open, std::shared_ptr<bool> draining)
      : stream_(std::move(socket)),
        options_(options),
        handler_(handler),
        open_(std::move(open)),
        draining_(std::move(draining)) {
    ++*open_;
  }
  ~Session() override { --*open_; }

  void Start() { Read(); }

  void Respond(int status, const std::string& content_type, std::string body,
               const std::map<std::string, std::string>& headers) override {
    if (closed_ || replied_) return;
    replied_ = true;
    http::response<http::string_body> res{static_cast<http::status>(status), version_};
    res.set(http::field::server, "dsinfer");
    res.set(http::field::content_type, content_type);
    for (const auto& [k, v] : headers) res.set(k, v);
    res.keep_alive(keep_alive_ && !*draining_);
    res.body() = std::move(body);
    res.prepare_payload();
    close_after_ = !res.keep_alive();
    Queue(Serialize(res));
    reply_done_ = true;
    MaybeFinish();
  }

  void StartEvents(const std::map<std::string, std::string>& headers) override {
    if (closed_ || replied_) return;
    replied_ = true;
    http::response_header<> h;
    h.version(version_);
    h.result(http::status::ok);
    h.set(http::field::server, "dsinfer");
    h.set(http::field::content_type, "text/event-stream");
    h.set(http::field::cache_control, "no-cache");
    h.set(http::field::transfer_encoding, "chunked");
    for (const auto& [k, v] : headers) h.set(k, v);
    if (!keep_alive_) h.set(http::field::connection, "close");
    close_after_ = !keep_alive_;
    events_started_ = true;
    Queue(Serialize(h));
  }

  void SendEvent(const std::string& data) override {
    if (closed_ || !replied_ || reply_done_) return;
    pending_events_ += "data: " + data + "\n\n";
    if (!writing_) Flush();
  }

  void EndEvents() override {
    if (closed_ || !replied_ || reply_done_) return;
    reply_done_ = true;
    if (!writing_) Flush();
    MaybeFinish();
  }

  void OnClose(std::function<void()> on_close) override { on_close_ = std::move(on_close); }
  bool closed() const override { return closed_; }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
    stream_.expires_after(std::chrono::seconds(options_.idle_timeout_s));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) return Reject(413, kErrorJson413);
    if (ec == http::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == beast::error::timeout || ec == net::error::connection_reset ||
        ec == net::error::eof) {
      return Close();
    }
    if (ec) return Reject(400, kErrorJson400);
    stream_.expires_never();
    const auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    const std::string target(msg.target());
    req.target = target.substr(0, target.find('?'));
    for (const auto& field : msg) {
      req.headers[Lower(std::string(field.name_string()))] = std::string(field.value());
    }
    req.body = msg.body();
    version_ = msg.version();
    keep_alive_ = msg.keep_alive();
    replied_ = reply_done_ = close_after_ = false;
    on_close_ = nullptr;
    Watch();
    handler_(shared_from_this(), std::move(req));
  }

  // A request we cannot read: answer and close.
  void Reject(int status, const char* body) {
    keep_alive_ = false;
    replied_ = false;
    Respond(status, "application/json", body, {});
  }

  // Notices a disconnect while the handler works: a read that completes with an error. Bytes that
  // arrive (a pipelined request) stay in buffer_ for the next Read().
  void Watch() {
    watching_ = true;
    stream_.async_read_some(
        buffer_.prepare(4096),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
  }

  void OnWatch(beast::error_code ec, size_t n) {
    watching_ = false;
    buffer_.commit(n);
    if (closed_) return;
    if (ec && ec != net::error::operation_aborted) return Close();
    if (!ec && !reply_done_ && buffer_.size() < 65536) return Watch();
    MaybeFinish();  // the reply ended (we cancelled the watch) or the client sent ahead
  }

  void Queue(std::string bytes) {
    outbox_.push_back(std::move(bytes));
    if (!writing_) Flush();
  }

  void Flush() {
    if (!pending_events_.empty()) {
      outbox_.push_back(beast::buffers_to_string(http::make_chunk(net::buffer(pending_events_))));
      pending_events_.clear();
    }
    if (reply_done_ && replied_ && !last_chunk_queued_ && outbox_.empty() && IsEvents()) {
      outbox_.push_back("0\r\n\r\n");
      last_chunk_queued_ = true;
    }
    if (outbox_.empty() || closed_) return;
    writing_ = true;
    writing_bytes_ = std::move(outbox_.front());
    outbox_.pop_front();
    net::async_write(stream_, net::buffer(writing_bytes_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       if (ec) return self->Close();
                       self->Flush();
                       self->MaybeFinish();
                     });
  }

  bool IsEvents() const { return events_started_; }

  // After the whole reply is written: the next request, or close.
  void MaybeFinish() {
    if (closed_ || closing_ || !reply_done_ || writing_ || !outbox_.empty() ||
        !pending_events_.empty()) {
      return;
    }
    if (IsEvents() && !last_chunk_queued_) return Flush();
    if (watching_) {
      stream_.socket().cancel();  // OnWatch comes back here
      return;
    }
    if (close_after_ || *draining_) return Linger();
    events_started_ = last_chunk_queued_ = false;
    Read();
  }

  // Closes after the reply: our side first, then whatever the client still sends (the rest of an
  // oversized body) is read and dropped for a moment, so that the client reads our reply instead
  // of a reset.
  void Linger() {
    closing_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    Drop();
  }

  void Drop() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(65536),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Drop();
                            });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().close(ignored);
    if (!reply_done_ && on_close_) {
      auto cb = std::move(on_close_);
      cb();
    }
    on_close_ = nullptr;
  }

  beast::tcp_stream stream_;
  const HttpServerOptions& options_;
  const HttpHandler& handler_;
  std::shared_ptr<int64_t> open_;
  std::shared_ptr<bool> draining_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool replied_ = false;     // Respond() or StartEvents() was called
  bool reply_done_ = false;  // the reply is complete (written or queued)
  bool events_started_ = false;
  bool last_chunk_queued_ = false;
  bool close_after_ = false;
  bool watching_ = false;
  bool writing_ = false;
  bool closed_ = false;
  bool closing_ = false;
  std::string writing_bytes_;
  std::deque<std::string> outbox_;
  std::string pending_events_;  // events not yet written: coalesced into one chunk
  std::function<void()> on_close_;
};

}  // namespace

HttpServer::HttpServer(net::io_context* io, HttpServerOptions options, HttpHandler handler)
    : io_(io), options_(std::move(options)), handler_(std::move(handler)), acceptor_(*io) {}

HttpServer::~HttpServer() = default;

Status HttpServer::Listen() {
  beast::error_code ec;
  const auto address = net::ip::make_address(options_.host, ec);
  if (ec) return InvalidArgument("--host " + options_.host + " is not an IP address");
  if (options_.port < 0 || options_.port > 65535) {
    return InvalidArgument("--port must be in [0, 65535], got " + std::to_string(options_.port));
  }
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(options_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Internal("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                    ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  Accept();
  return Status::Ok();
}

void HttpServer::Accept() {
  acceptor_.async_accept(*io_, [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), options_, handler_, open_, draining_)->Start();
    }
    Accept();
  });
}

void HttpServer::StopAccepting() {
  *draining_ = true;
  beast::error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace dsinfer::api
