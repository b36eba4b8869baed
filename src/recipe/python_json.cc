// PythonJsonDumps: a recursive writer; floats go through std::to_chars (shortest round-trip digits,
// as Python's repr) and are then laid out with Python's rules for exponent and ".0".
#include "recipe/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace dsinfer::recipe {

namespace {

void AppendString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// Python float repr: shortest digits; scientific when exponent < -4 or >= 16.
void AppendFloat(double v, std::string* out) {
  if (std::isnan(v)) {
    *out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    *out += v > 0 ? "Infinity" : "-Infinity";
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  bool neg = false;
  if (!mant.empty() && mant[0] == '-') {
    neg = true;
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  std::string r = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    r += digits.substr(0, 1);
    if (digits.size() > 1) {
      r.push_back('.');
      r.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    r += eb;
  } else if (exp < 0) {
    r.append("0.");
    r.append(static_cast<size_t>(-exp - 1), '0');
    r.append(digits);
  } else {
    const auto int_len = static_cast<size_t>(exp + 1);
    if (digits.size() <= int_len) {
      r.append(digits);
      r.append(int_len - digits.size(), '0');
      r.append(".0");
    } else {
      r.append(digits, 0, int_len);
      r.push_back('.');
      r.append(digits, int_len);
    }
  }
  *out += r;
}

void Append(const nlohmann::ordered_json& v, std::string* out) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      *out += "null";
      break;
    case nlohmann::json::value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      break;
    case nlohmann::json::value_t::number_integer:
      *out += std::to_string(v.get<int64_t>());
      break;
    case nlohmann::json::value_t::number_unsigned:
      *out += std::to_string(v.get<uint64_t>());
      break;
    case nlohmann::json::value_t::number_float:
      AppendFloat(v.get<double>(), out);
      break;
    case nlohmann::json::value_t::string:
      AppendString(v.get_ref<const std::string&>(), out);
      break;
    case nlohmann::json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& x : v) {
        if (!first) *out += ", ";
        first = false;
        Append(x, out);
      }
      out->push_back(']');
      break;
    }
    case nlohmann::json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) *out += ", ";
        first = false;
        AppendString(k, out);
        *out += ": ";
        Append(x, out);
      }
      out->push_back('}');
      break;
    }
    default:  // binary / discarded never come from parsing JSON text
      *out += "null";
  }
}

}  // namespace

std::string PythonJsonDumps(const nlohmann::ordered_json& value) {
  std::string out;
  Append(value, &out);
  return out;
}

std::string PythonJsonString(const std::string& s) {
  std::string out;
  AppendString(s, &out);
  return out;
}

}  // namespace dsinfer::recipe
