// HttpServer: HTTP/1.1 on Boost.Beast / Asio, asynchronous: every connection is a Session on one
// io_context (no thread per connection), with keep-alive, a body limit (413), an idle timeout
// while waiting for a request, and server-sent events over chunked transfer encoding. A Session
// serves one exchange at a time; while the handler works on it the session watches the socket,
// so a client that goes away is noticed at once (Exchange::OnClose) even before anything is
// written. Everything here runs on the io_context's thread; other threads post to it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"

namespace dsinfer::api {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // the path, without the query string
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

// One request's reply. Call on the io_context's thread only. After the client has gone every
// call is a no-op.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // A whole response. `headers`: extra (name, value) pairs.
  virtual void Respond(int status, const std::string& content_type, std::string body,
                       const std::map<std::string, std::string>& headers = {}) = 0;
  // 200 text/event-stream; then SendEvent() per event and EndEvents() once.
  virtual void StartEvents(const std::map<std::string, std::string>& headers = {}) = 0;
  // Sends "data: <data>\n\n".
  virtual void SendEvent(const std::string& data) = 0;
  virtual void EndEvents() = 0;
  // `on_close` runs (on the io thread) if the client disconnects before the reply has ended.
  virtual void OnClose(std::function<void()> on_close) = 0;
  virtual bool closed() const = 0;
};

using HttpHandler = std::function<void(std::shared_ptr<Exchange>, HttpRequest)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0: any free port
  int64_t max_body_bytes = 8 << 20;  // larger bodies get 413
  int idle_timeout_s = 300;          // a keep-alive connection without a request is closed
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context* io, HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  // Binds and starts accepting. InvalidArgument for a bad host, Internal if the port is taken.
  Status Listen();
  int port() const { return port_; }
  // Stops accepting new connections (draining); open connections keep being served. A reply on a
  // connection after this closes the connection.
  void StopAccepting();
  // Connections open now.
  int64_t open_connections() const { return *open_; }

 private:
  void Accept();

  boost::asio::io_context* io_;
  HttpServerOptions options_;
  HttpHandler handler_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<int64_t> open_ = std::make_shared<int64_t>(0);
  std::shared_ptr<bool> draining_ = std::make_shared<bool>(false);
  int port_ = 0;
};

}  // namespace dsinfer::api
