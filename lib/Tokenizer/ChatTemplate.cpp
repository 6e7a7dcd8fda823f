//===- ChatTemplate.cpp - Hugging Face chat templates in C++ --------------===//
//
// A template is cut into text and tags as Jinja2's lexer cuts it under
// transformers' settings (trim_blocks, lstrip_blocks, one trailing newline
// dropped), its tags are parsed into a tree of nodes and expressions, and
// the tree is rendered against the conversation. Values are Python's as
// Jinja2 sees them: undefined, None, booleans, ints, floats, strings (code
// points when indexed or counted), lists, dicts and namespaces.
//
// The template is untrusted text: parsing nests at most kMaxDepth deep,
// and rendering stops after kMaxSteps evaluations or kMaxOutput bytes.
//
//===----------------------------------------------------------------------===//

#include "pcc/Tokenizer/ChatTemplate.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <vector>

using namespace pcc;
using llvm::StringRef;

namespace {
constexpr int kMaxDepth = 128;
constexpr int64_t kMaxSteps = 10000000;
constexpr size_t kMaxOutput = size_t(16) << 20;
constexpr size_t kMaxItems = size_t(1) << 20;

/// An error at a line of the template (0: none known).
struct Failure {
  std::string message;
  int line = 0;
};
[[noreturn]] void fail(const std::string &message, int line) {
  throw Failure{message, line};
}

//===--- Values ----------------------------------------------------------===//

struct Value;
using List = std::vector<Value>;
struct Dict;

struct Value {
  enum Kind { Undefined, None, Bool, Int, Float, String, ListV, DictV };
  Kind kind = Undefined;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  /// A namespace(): a dict whose attributes `set` may assign.
  bool isNamespace = false;

  static Value ofKind(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
  static Value none() { return ofKind(None); }
  static Value of(bool b) {
    Value v = ofKind(Bool);
    v.boolean = b;
    return v;
  }
  static Value of(int64_t i) {
    Value v = ofKind(Int);
    v.integer = i;
    return v;
  }
  static Value ofReal(double d) {
    Value v = ofKind(Float);
    v.real = d;
    return v;
  }
  static Value of(std::string s) {
    Value v = ofKind(String);
    v.text = std::move(s);
    return v;
  }
  static Value ofList(List items) {
    Value v = ofKind(ListV);
    v.list = std::make_shared<List>(std::move(items));
    return v;
  }
  static Value ofDict(Dict items);
  bool isNumber() const { return kind == Int || kind == Float || kind == Bool; }
  double number() const {
    return kind == Float  ? real
           : kind == Bool ? double(boolean)
                          : double(integer);
  }
};

/// A dict: its keys in the order they were first set, as Python's.
struct Dict {
  using Entries = std::vector<std::pair<std::string, Value>>;
  Entries entries;
  Dict() = default;
  Dict(std::initializer_list<std::pair<std::string, Value>> items)
      : entries(items) {}
  Entries::iterator begin() { return entries.begin(); }
  Entries::iterator end() { return entries.end(); }
  Entries::const_iterator begin() const { return entries.begin(); }
  Entries::const_iterator end() const { return entries.end(); }
  Entries::iterator find(StringRef key) {
    return std::find_if(begin(), end(),
                        [&](const auto &e) { return e.first == key; });
  }
  Entries::const_iterator find(StringRef key) const {
    return std::find_if(begin(), end(),
                        [&](const auto &e) { return e.first == key; });
  }
  size_t count(StringRef key) const { return find(key) != end(); }
  size_t size() const { return entries.size(); }
  bool empty() const { return entries.empty(); }
  Value &operator[](StringRef key) {
    auto it = find(key);
    if (it != end())
      return it->second;
    entries.emplace_back(key.str(), Value());
    return entries.back().second;
  }
};

Value Value::ofDict(Dict items) {
  Value v = ofKind(DictV);
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}

const char *kindName(const Value &v) {
  switch (v.kind) {
  case Value::Undefined:
    return "undefined";
  case Value::None:
    return "None";
  case Value::Bool:
    return "bool";
  case Value::Int:
    return "int";
  case Value::Float:
    return "float";
  case Value::String:
    return "str";
  case Value::ListV:
    return "list";
  case Value::DictV:
    return "dict";
  }
  return "value";
}

bool truthy(const Value &v) {
  switch (v.kind) {
  case Value::Undefined:
  case Value::None:
    return false;
  case Value::Bool:
    return v.boolean;
  case Value::Int:
    return v.integer != 0;
  case Value::Float:
    return v.real != 0;
  case Value::String:
    return !v.text.empty();
  case Value::ListV:
    return !v.list->empty();
  case Value::DictV:
    return !v.dict->empty();
  }
  return false;
}

/// The code points of UTF-8 text, each as its bytes.
std::vector<std::string> codePoints(StringRef s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = std::max<size_t>(1, llvm::getNumBytesForUTF8(s[i]));
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n).str());
    i += n;
  }
  return out;
}

std::string realText(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d < 0 ? "-inf" : "inf";
  // Python's repr: the shortest text that reads back the same.
  std::string s;
  for (int precision = 1; precision <= 17; ++precision) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, d);
    s = buffer;
    if (std::strtod(buffer, nullptr) == d)
      break;
  }
  if (s.find_first_of(".eni") == std::string::npos)
    s += ".0";
  return s;
}

std::string quoted(StringRef s) {
  char q = s.contains('\'') && !s.contains('"') ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\')
      out += '\\';
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + q;
}

std::string repr(const Value &v, int depth = 0);

/// str(v), as {{ v }} prints it.
std::string str(const Value &v) {
  switch (v.kind) {
  case Value::Undefined:
    return "";
  case Value::None:
    return "None";
  case Value::Bool:
    return v.boolean ? "True" : "False";
  case Value::Int:
    return std::to_string(v.integer);
  case Value::Float:
    return realText(v.real);
  case Value::String:
    return v.text;
  case Value::ListV:
  case Value::DictV:
    return repr(v);
  }
  return "";
}

std::string repr(const Value &v, int depth) {
  if (depth > kMaxDepth)
    fail("a value nests too deep (or holds itself)", 0);
  if (v.kind == Value::String)
    return quoted(v.text);
  if (v.kind == Value::ListV) {
    std::string out = "[";
    for (size_t i = 0; i < v.list->size(); ++i)
      out += (i ? ", " : "") + repr((*v.list)[i], depth + 1);
    return out + "]";
  }
  if (v.kind == Value::DictV) {
    std::string out = v.isNamespace ? "<Namespace {" : "{";
    bool first = true;
    for (const auto &[k, x] : *v.dict) {
      out += (first ? "" : ", ") + quoted(k) + ": " + repr(x, depth + 1);
      first = false;
    }
    return out + (v.isNamespace ? "}>" : "}");
  }
  return str(v);
}

/// json.dumps(v, ensure_ascii=False, indent=indent), as transformers'
/// tojson.
void toJson(const Value &v, int indent, int depth, std::string &out) {
  if (depth > kMaxDepth || out.size() > kMaxOutput)
    fail("a value nests too deep (or holds itself) or grows too long", 0);
  auto newline = [&](int d) {
    if (indent >= 0) {
      out += '\n';
      out.append(size_t(indent * d), ' ');
    }
  };
  switch (v.kind) {
  case Value::Undefined:
  case Value::None:
    out += "null";
    return;
  case Value::Bool:
    out += v.boolean ? "true" : "false";
    return;
  case Value::Int:
    out += std::to_string(v.integer);
    return;
  case Value::Float:
    out += std::isfinite(v.real) ? realText(v.real)
           : std::isnan(v.real)  ? "NaN"
           : v.real < 0          ? "-Infinity"
                                 : "Infinity";
    return;
  case Value::String: {
    out += '"';
    for (unsigned char c : v.text) {
      switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20)
          out += llvm::formatv("\\u{0:x-4}", unsigned(c)).str();
        else
          out += char(c);
      }
    }
    out += '"';
    return;
  }
  case Value::ListV: {
    if (v.list->empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < v.list->size(); ++i) {
      if (i)
        out += indent >= 0 ? "," : ", ";
      newline(depth + 1);
      toJson((*v.list)[i], indent, depth + 1, out);
    }
    newline(depth);
    out += ']';
    return;
  }
  case Value::DictV: {
    if (v.dict->empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto &[k, x] : *v.dict) {
      if (!first)
        out += indent >= 0 ? "," : ", ";
      first = false;
      newline(depth + 1);
      toJson(Value::of(k), indent, depth + 1, out);
      out += ": ";
      toJson(x, indent, depth + 1, out);
    }
    newline(depth);
    out += '}';
    return;
  }
  }
}

bool equal(const Value &a, const Value &b, int depth = 0) {
  if (depth > kMaxDepth)
    fail("a value nests too deep (or holds itself)", 0);
  if (a.isNumber() && b.isNumber())
    return a.number() == b.number();
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Value::Undefined:
  case Value::None:
    return true;
  case Value::String:
    return a.text == b.text;
  case Value::ListV:
    if (a.list->size() != b.list->size())
      return false;
    for (size_t i = 0; i < a.list->size(); ++i)
      if (!equal((*a.list)[i], (*b.list)[i], depth + 1))
        return false;
    return true;
  case Value::DictV:
    if (a.dict->size() != b.dict->size())
      return false;
    for (const auto &[k, x] : *a.dict) {
      auto it = b.dict->find(k);
      if (it == b.dict->end() || !equal(x, it->second, depth + 1))
        return false;
    }
    return true;
  default:
    return false;
  }
}

Value fromJson(const llvm::json::Value &j) {
  switch (j.kind()) {
  case llvm::json::Value::Null:
    return Value::none();
  case llvm::json::Value::Boolean:
    return Value::of(*j.getAsBoolean());
  case llvm::json::Value::Number:
    if (std::optional<int64_t> i = j.getAsInteger())
      return Value::of(*i);
    return Value::ofReal(*j.getAsNumber());
  case llvm::json::Value::String:
    return Value::of(j.getAsString()->str());
  case llvm::json::Value::Array: {
    List items;
    for (const llvm::json::Value &x : *j.getAsArray())
      items.push_back(fromJson(x));
    return Value::ofList(std::move(items));
  }
  case llvm::json::Value::Object: {
    // The JSON reader keeps no order: the keys sorted.
    std::vector<std::pair<std::string, const llvm::json::Value *>> sorted;
    for (const auto &[k, x] : *j.getAsObject())
      sorted.emplace_back(k.str(), &x);
    llvm::sort(sorted);
    Dict items;
    for (const auto &[k, x] : sorted)
      items[k] = fromJson(*x);
    return Value::ofDict(std::move(items));
  }
  }
  return Value();
}
} // namespace

//===--- The tree --------------------------------------------------------===//

namespace pcc::chat {
struct Expr {
  enum Kind {
    Literal,
    Name,
    Attr,
    Index,
    Slice,
    Call,
    Filter,
    Test,
    Unary,
    Binary,
    And,
    Or,
    Not,
    Cond,
    ListLit,
    DictLit
  };
  Kind kind;
  int line = 0;
  std::string name; // a Name's, an Attr's, a Filter's or a Test's; an op
  Value literal;
  bool negated = false; // `is not`
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
  // Slice: args[0] the sequence, then start, stop, step (null if absent).
};

struct Node {
  enum Kind { Body, Text, Output, If, For, Set, Break, Continue };
  Kind kind = Body;
  int line = 0;
  std::string text;                          // Text
  std::unique_ptr<Expr> expr;                // Output, For's iterable, Set
  std::vector<std::unique_ptr<Node>> body;   // Body, For's body
  std::vector<std::unique_ptr<Expr>> conds;  // If: one per branch
  std::vector<std::unique_ptr<Node>> bodies; // If: one per branch
  std::unique_ptr<Node> elseBody;            // If, For
  std::vector<std::string> targets;          // For's names; Set's name
  std::string attribute;                     // Set ns.attribute
  std::unique_ptr<Expr> filter;              // For ... if filter
};
} // namespace pcc::chat

using pcc::chat::Expr;
using pcc::chat::Node;

namespace {

//===--- Lexing ----------------------------------------------------------===//

struct Segment {
  enum Kind { Text, Output, Statement } kind;
  std::string text;
  int line;
};

int linesIn(StringRef s) { return int(s.count('\n')); }

std::vector<Segment> segment(StringRef source) {
  // Jinja drops one trailing newline (keep_trailing_newline=False).
  if (source.ends_with("\n"))
    source = source.drop_back();
  std::vector<Segment> out;
  size_t pos = 0;
  int line = 1;
  while (pos < source.size()) {
    size_t at = pos;
    while (true) {
      at = source.find('{', at);
      if (at == StringRef::npos || at + 1 >= source.size())
        break;
      char c = source[at + 1];
      if (c == '{' || c == '%' || c == '#')
        break;
      ++at;
    }
    if (at == StringRef::npos || at + 1 >= source.size()) {
      out.push_back({Segment::Text, source.substr(pos).str(), line});
      break;
    }
    std::string text = source.slice(pos, at).str();
    char open = source[at + 1];
    bool block = open != '{';
    char marker = at + 2 < source.size() ? source[at + 2] : 0;
    if (marker == '-') {
      text = StringRef(text).rtrim(" \t\n\r\f\v").str();
    } else if (block && marker != '+') {
      // lstrip_blocks: the spaces before a tag that begins its line.
      size_t nl = text.rfind('\n');
      size_t from = nl == std::string::npos ? 0 : nl + 1;
      bool lineStart =
          nl != std::string::npos || pos == 0 || source[pos - 1] == '\n';
      if (lineStart && text.find_first_not_of(" \t", from) == std::string::npos)
        text.erase(from);
    }
    if (!text.empty())
      out.push_back({Segment::Text, text, line});
    line += linesIn(source.slice(pos, at));
    // The tag's end, past any string literal in it.
    char close = open == '{' ? '}' : open == '%' ? '%' : '#';
    size_t end = at + 2;
    char quote = 0;
    for (; end + 1 < source.size(); ++end) {
      char c = source[end];
      if (open != '#') {
        if (quote) {
          if (c == '\\')
            ++end;
          else if (c == quote)
            quote = 0;
          continue;
        }
        if (c == '"' || c == '\'') {
          quote = c;
          continue;
        }
      }
      if (c == close && source[end + 1] == '}')
        break;
    }
    if (end + 1 >= source.size())
      fail(std::string("a tag '{") + open + "' is not closed", line);
    size_t innerBegin = at + 2 + (marker == '-' || marker == '+');
    size_t innerEnd = end;
    char endMarker = end > innerBegin ? source[end - 1] : 0;
    bool trimAfter = endMarker == '-';
    if (endMarker == '-' || endMarker == '+')
      --innerEnd;
    StringRef inner = source.slice(innerBegin, std::max(innerBegin, innerEnd));
    if (open != '#')
      out.push_back({open == '{' ? Segment::Output : Segment::Statement,
                     inner.str(), line});
    line += linesIn(source.slice(at, end + 2));
    pos = end + 2;
    if (trimAfter) {
      while (pos < source.size() &&
             StringRef(" \t\n\r\f\v").contains(source[pos])) {
        line += source[pos] == '\n';
        ++pos;
      }
    } else if (block && endMarker != '+') {
      // trim_blocks: the newline after a block tag.
      if (source.substr(pos).starts_with("\r\n"))
        pos += 2, ++line;
      else if (pos < source.size() && source[pos] == '\n')
        ++pos, ++line;
    }
  }
  return out;
}

struct Token {
  enum Kind { End, Name, Number, String, Op } kind;
  std::string text;
  Value number;
};

std::vector<Token> tokenize(StringRef s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (llvm::isSpace(c)) {
      ++i;
      continue;
    }
    if (llvm::isAlpha(c) || c == '_') {
      size_t j = i;
      while (j < s.size() && (llvm::isAlnum(s[j]) || s[j] == '_'))
        ++j;
      out.push_back({Token::Name, s.slice(i, j).str(), {}});
      i = j;
      continue;
    }
    if (llvm::isDigit(c)) {
      size_t j = i;
      bool real = false;
      while (
          j < s.size() &&
          (llvm::isDigit(s[j]) || s[j] == '_' ||
           (s[j] == '.' && j + 1 < s.size() && llvm::isDigit(s[j + 1])) ||
           ((s[j] == 'e' || s[j] == 'E') && j + 1 < s.size() &&
            (llvm::isDigit(s[j + 1]) || s[j + 1] == '-' || s[j + 1] == '+')))) {
        if (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
          real = true;
          if ((s[j] == 'e' || s[j] == 'E') &&
              (s[j + 1] == '-' || s[j + 1] == '+'))
            ++j;
        }
        ++j;
      }
      std::string digits = s.slice(i, j).str();
      digits.erase(std::remove(digits.begin(), digits.end(), '_'),
                   digits.end());
      Token t{Token::Number, digits, {}};
      if (real) {
        t.number = Value::ofReal(std::strtod(digits.c_str(), nullptr));
      } else {
        int64_t v = 0;
        if (StringRef(digits).getAsInteger(10, v))
          fail("the number " + digits + " is out of range", line);
        t.number = Value::of(v);
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '"' || c == '\'') {
      std::string text;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          text += s[j];
          continue;
        }
        char e = s[++j];
        switch (e) {
        case 'n':
          text += '\n';
          break;
        case 't':
          text += '\t';
          break;
        case 'r':
          text += '\r';
          break;
        case '0':
          text += '\0';
          break;
        case '\\':
        case '\'':
        case '"':
          text += e;
          break;
        case 'u': {
          unsigned code = 0;
          if (j + 4 >= s.size() || s.substr(j + 1, 4).getAsInteger(16, code))
            fail("a \\u escape needs four hex digits", line);
          char buffer[8];
          char *p = buffer;
          llvm::ConvertCodePointToUTF8(code, p);
          text.append(buffer, p);
          j += 4;
          break;
        }
        default:
          text += '\\';
          text += e;
        }
      }
      if (j >= s.size())
        fail("a string is not closed", line);
      out.push_back({Token::String, std::move(text), {}});
      i = j + 1;
      continue;
    }
    static const char *const kOps[] = {"==", "!=", "<=", ">=", "//", "**"};
    std::string op(1, c);
    for (const char *two : kOps)
      if (s.substr(i).starts_with(two))
        op = two;
    if (op.size() == 1 && !StringRef("()[]{}.,:|~+-*/%<>=").contains(c))
      fail(std::string("unexpected character '") + c + "'", line);
    out.push_back({Token::Op, op, {}});
    i += op.size();
  }
  out.push_back({Token::End, "", {}});
  return out;
}

//===--- Parsing ---------------------------------------------------------===//

class ExprParser {
public:
  ExprParser(std::vector<Token> tokens, int line)
      : tokens(std::move(tokens)), line(line) {}

  std::unique_ptr<Expr> parse() {
    std::unique_ptr<Expr> e = expression();
    return e;
  }
  const Token &peek(size_t k = 0) const {
    return tokens[std::min(at + k, tokens.size() - 1)];
  }
  bool atEnd() const { return peek().kind == Token::End; }
  bool isOp(StringRef op, size_t k = 0) const {
    return peek(k).kind == Token::Op && peek(k).text == op;
  }
  bool isName(StringRef name, size_t k = 0) const {
    return peek(k).kind == Token::Name && peek(k).text == name;
  }
  bool acceptOp(StringRef op) {
    if (!isOp(op))
      return false;
    ++at;
    return true;
  }
  bool acceptName(StringRef name) {
    if (!isName(name))
      return false;
    ++at;
    return true;
  }
  void expectOp(StringRef op) {
    if (!acceptOp(op))
      fail("expected '" + op.str() + "', found '" + peek().text + "'", line);
  }
  std::string name() {
    if (peek().kind != Token::Name)
      fail("expected a name, found '" + peek().text + "'", line);
    return tokens[at++].text;
  }
  void expectEnd() {
    if (!atEnd())
      fail("unexpected '" + peek().text + "'", line);
  }

  /// An expression; without `withCond`, no `x if c else y` (a for loop's
  /// iterable, whose `if` filters it).
  std::unique_ptr<Expr> expression(bool withCond = true) {
    Guard guard(*this);
    std::unique_ptr<Expr> value = orExpr();
    if (withCond && acceptName("if")) {
      auto e = make(Expr::Cond);
      e->args.push_back(std::move(value));
      e->args.push_back(orExpr());
      e->args.push_back(acceptName("else") ? expression() : nullptr);
      return e;
    }
    return value;
  }

private:
  struct Guard {
    explicit Guard(ExprParser &p) : p(p) {
      if (++p.depth > kMaxDepth)
        fail("the expression nests too deep", p.line);
    }
    ~Guard() { --p.depth; }
    ExprParser &p;
  };

  std::unique_ptr<Expr> make(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  std::unique_ptr<Expr> binary(Expr::Kind kind, std::string op,
                               std::unique_ptr<Expr> a,
                               std::unique_ptr<Expr> b) {
    auto e = make(kind);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  std::unique_ptr<Expr> orExpr() {
    auto e = andExpr();
    while (acceptName("or"))
      e = binary(Expr::Or, "or", std::move(e), andExpr());
    return e;
  }
  std::unique_ptr<Expr> andExpr() {
    auto e = notExpr();
    while (acceptName("and"))
      e = binary(Expr::And, "and", std::move(e), notExpr());
    return e;
  }
  std::unique_ptr<Expr> notExpr() {
    if (acceptName("not")) {
      Guard guard(*this);
      auto e = make(Expr::Not);
      e->args.push_back(notExpr());
      return e;
    }
    return compare();
  }
  std::unique_ptr<Expr> compare() {
    auto e = math1();
    while (true) {
      static const char *const kCompares[] = {"==", "!=", "<", ">", "<=", ">="};
      std::string op;
      for (const char *c : kCompares)
        if (isOp(c))
          op = c;
      if (!op.empty()) {
        ++at;
      } else if (isName("in")) {
        ++at;
        op = "in";
      } else if (isName("not") && isName("in", 1)) {
        at += 2;
        op = "not in";
      } else {
        return e;
      }
      e = binary(Expr::Binary, op, std::move(e), math1());
    }
  }
  std::unique_ptr<Expr> math1() {
    auto e = concat();
    while (isOp("+") || isOp("-")) {
      std::string op = tokens[at++].text;
      e = binary(Expr::Binary, op, std::move(e), concat());
    }
    return e;
  }
  std::unique_ptr<Expr> concat() {
    auto e = math2();
    while (acceptOp("~"))
      e = binary(Expr::Binary, "~", std::move(e), math2());
    return e;
  }
  std::unique_ptr<Expr> math2() {
    auto e = power();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      std::string op = tokens[at++].text;
      e = binary(Expr::Binary, op, std::move(e), power());
    }
    return e;
  }
  std::unique_ptr<Expr> power() {
    auto e = unary();
    while (acceptOp("**"))
      e = binary(Expr::Binary, "**", std::move(e), unary());
    return e;
  }
  std::unique_ptr<Expr> unary() {
    if (isOp("-") || isOp("+")) {
      Guard guard(*this);
      auto e = make(Expr::Unary);
      e->name = tokens[at++].text;
      e->args.push_back(unary());
      return e;
    }
    return filters(postfix(primary()));
  }
  void callArguments(Expr &e) {
    if (acceptOp(")"))
      return;
    do {
      if (isOp(")"))
        break;
      if (peek().kind == Token::Name && isOp("=", 1)) {
        std::string key = name();
        ++at;
        e.kwargs.emplace_back(key, expression());
      } else {
        e.args.push_back(expression());
      }
    } while (acceptOp(","));
    expectOp(")");
  }
  std::unique_ptr<Expr> filters(std::unique_ptr<Expr> e) {
    while (true) {
      if (acceptOp("|")) {
        auto f = make(Expr::Filter);
        f->name = name();
        f->args.push_back(std::move(e));
        if (acceptOp("("))
          callArguments(*f);
        e = std::move(f);
      } else if (acceptName("is")) {
        auto t = make(Expr::Test);
        t->negated = acceptName("not");
        t->name = name();
        t->args.push_back(std::move(e));
        if (acceptOp("(")) {
          callArguments(*t);
        } else if (peek().kind == Token::String ||
                   peek().kind == Token::Number ||
                   (peek().kind == Token::Name && !isName("and") &&
                    !isName("or") && !isName("else") && !isName("if") &&
                    !isName("in") && !isName("not"))) {
          t->args.push_back(primary());
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  std::unique_ptr<Expr> postfix(std::unique_ptr<Expr> e) {
    while (true) {
      if (acceptOp(".")) {
        auto a = make(Expr::Attr);
        a->name = peek().kind == Token::Number ? tokens[at++].text : name();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (acceptOp("[")) {
        std::unique_ptr<Expr> parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!isOp(":") && !isOp("]"))
            parts[k] = expression();
          if (k < 2 && acceptOp(":"))
            slice = true;
          else
            break;
        }
        expectOp("]");
        if (!slice && !parts[0])
          fail("an empty subscript", line);
        auto x = make(slice ? Expr::Slice : Expr::Index);
        x->args.push_back(std::move(e));
        for (int k = 0; k < (slice ? 3 : 1); ++k)
          x->args.push_back(std::move(parts[k]));
        e = std::move(x);
      } else if (acceptOp("(")) {
        auto c = make(Expr::Call);
        c->args.push_back(std::move(e));
        callArguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  std::unique_ptr<Expr> primary() {
    Guard guard(*this);
    const Token &t = peek();
    if (t.kind == Token::Number) {
      auto e = make(Expr::Literal);
      e->literal = t.number;
      ++at;
      return e;
    }
    if (t.kind == Token::String) {
      // Adjacent strings join, as in Python.
      std::string text;
      while (peek().kind == Token::String)
        text += tokens[at++].text;
      auto e = make(Expr::Literal);
      e->literal = Value::of(text);
      return e;
    }
    if (t.kind == Token::Name) {
      std::string n = name();
      auto e = make(Expr::Literal);
      if (n == "true" || n == "True")
        e->literal = Value::of(true);
      else if (n == "false" || n == "False")
        e->literal = Value::of(false);
      else if (n == "none" || n == "None")
        e->literal = Value::none();
      else {
        e->kind = Expr::Name;
        e->name = n;
      }
      return e;
    }
    if (acceptOp("(")) {
      auto first = expression();
      if (!acceptOp(",")) {
        expectOp(")");
        return first;
      }
      // A tuple: a list.
      auto e = make(Expr::ListLit);
      e->args.push_back(std::move(first));
      while (!isOp(")")) {
        e->args.push_back(expression());
        if (!acceptOp(","))
          break;
      }
      expectOp(")");
      return e;
    }
    if (acceptOp("[")) {
      auto e = make(Expr::ListLit);
      while (!isOp("]")) {
        e->args.push_back(expression());
        if (!acceptOp(","))
          break;
      }
      expectOp("]");
      return e;
    }
    if (acceptOp("{")) {
      auto e = make(Expr::DictLit);
      while (!isOp("}")) {
        e->args.push_back(expression());
        expectOp(":");
        e->args.push_back(expression());
        if (!acceptOp(","))
          break;
      }
      expectOp("}");
      return e;
    }
    fail("unexpected '" + t.text + "'", line);
  }

  std::vector<Token> tokens;
  size_t at = 0;
  int line;
  int depth = 0;
};

class TemplateParser {
public:
  explicit TemplateParser(std::vector<Segment> segments)
      : segments(std::move(segments)) {}

  std::unique_ptr<Node> parse() {
    std::string stop;
    auto root = body({}, stop);
    if (!stop.empty())
      fail("'" + stop + "' without its block", line);
    return root;
  }

private:
  /// Nodes up to one of the statements `stops` (whose parser is left in
  /// `stopParser`, its keyword in `stop`), or to the end.
  std::unique_ptr<Node> body(const std::vector<StringRef> &stops,
                             std::string &stop) {
    if (++depth > kMaxDepth)
      fail("the blocks nest too deep", line);
    auto node = std::make_unique<Node>();
    stop.clear();
    while (next < segments.size()) {
      const Segment &s = segments[next++];
      line = s.line;
      if (s.kind == Segment::Text) {
        auto t = std::make_unique<Node>();
        t->kind = Node::Text;
        t->text = s.text;
        node->body.push_back(std::move(t));
        continue;
      }
      auto p = std::make_unique<ExprParser>(tokenize(s.text, s.line), s.line);
      if (s.kind == Segment::Output) {
        auto o = std::make_unique<Node>();
        o->kind = Node::Output;
        o->line = s.line;
        o->expr = p->parse();
        p->expectEnd();
        node->body.push_back(std::move(o));
        continue;
      }
      std::string keyword = p->name();
      if (llvm::is_contained(stops, keyword)) {
        stop = keyword;
        stopParser = std::move(p);
        --depth;
        return node;
      }
      node->body.push_back(statement(keyword, *p));
    }
    if (!stops.empty())
      fail("a block is not closed (expected '" + stops.back().str() + "')",
           line);
    --depth;
    return node;
  }

  std::unique_ptr<Node> statement(const std::string &keyword, ExprParser &p) {
    auto n = std::make_unique<Node>();
    n->line = line;
    if (keyword == "if") {
      n->kind = Node::If;
      n->conds.push_back(p.parse());
      p.expectEnd();
      std::string stop;
      while (true) {
        n->bodies.push_back(body({"elif", "else", "endif"}, stop));
        if (stop == "elif") {
          n->conds.push_back(stopParser->parse());
          stopParser->expectEnd();
          continue;
        }
        stopParser->expectEnd();
        if (stop == "else") {
          n->elseBody = body({"endif"}, stop);
          stopParser->expectEnd();
        }
        return n;
      }
    }
    if (keyword == "for") {
      n->kind = Node::For;
      do
        n->targets.push_back(p.name());
      while (p.acceptOp(","));
      if (!p.acceptName("in"))
        fail("expected 'in' in a for loop", line);
      n->expr = p.expression(/*withCond=*/false);
      if (p.acceptName("if"))
        n->filter = p.expression();
      if (p.acceptName("recursive"))
        fail("recursive loops are not supported", line);
      p.expectEnd();
      std::string stop;
      auto loopBody = body({"else", "endfor"}, stop);
      n->body.push_back(std::move(loopBody));
      stopParser->expectEnd();
      if (stop == "else") {
        n->elseBody = body({"endfor"}, stop);
        stopParser->expectEnd();
      }
      return n;
    }
    if (keyword == "set") {
      n->kind = Node::Set;
      n->targets.push_back(p.name());
      if (p.acceptOp("."))
        n->attribute = p.name();
      if (!p.acceptOp("="))
        fail("a set block ({% set x %}...{% endset %}) is not supported", line);
      n->expr = p.expression();
      p.expectEnd();
      return n;
    }
    if (keyword == "break" || keyword == "continue") {
      n->kind = keyword == "break" ? Node::Break : Node::Continue;
      p.expectEnd();
      return n;
    }
    if (keyword == "generation") {
      // transformers' marker of the assistant's part: its body as it is.
      p.expectEnd();
      std::string stop;
      n = body({"endgeneration"}, stop);
      stopParser->expectEnd();
      return n;
    }
    fail("the statement '" + keyword + "' is not supported", line);
  }

  std::vector<Segment> segments;
  size_t next = 0;
  int line = 1;
  int depth = 0;
  std::unique_ptr<ExprParser> stopParser;
};

//===--- Rendering -------------------------------------------------------===//

struct LoopControl {
  bool isBreak;
};

class Renderer {
public:
  Renderer(std::string &out) : out(out) { scopes.emplace_back(); }

  void define(const std::string &name, Value v) {
    scopes.front()[name] = std::move(v);
  }

  void render(const Node &n) {
    step(n.line);
    switch (n.kind) {
    case Node::Body:
      for (const auto &child : n.body)
        render(*child);
      return;
    case Node::Text:
      emit(n.text);
      return;
    case Node::Output:
      emit(str(eval(*n.expr)));
      return;
    case Node::If:
      for (size_t i = 0; i < n.conds.size(); ++i)
        if (truthy(eval(*n.conds[i]))) {
          render(*n.bodies[i]);
          return;
        }
      if (n.elseBody)
        render(*n.elseBody);
      return;
    case Node::For:
      return loop(n);
    case Node::Set: {
      Value v = eval(*n.expr);
      if (n.attribute.empty()) {
        scopes.back()[n.targets[0]] = std::move(v);
        return;
      }
      Value target = lookup(n.targets[0], n.line);
      if (!target.isNamespace)
        fail("cannot set an attribute of '" + n.targets[0] +
                 "' (not a namespace)",
             n.line);
      (*target.dict)[n.attribute] = std::move(v);
      return;
    }
    case Node::Break:
    case Node::Continue:
      if (!loops)
        fail("'break' or 'continue' outside a loop", n.line);
      throw LoopControl{n.kind == Node::Break};
    }
  }

private:
  void step(int line) {
    if (++steps > kMaxSteps)
      fail("the template runs too long", line);
  }
  void emit(StringRef s) {
    out += s;
    if (out.size() > kMaxOutput)
      fail("the template's text grows past 16 MiB", 0);
  }

  Value lookup(const std::string &name, int line) {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end())
        return found->second;
    }
    (void)line;
    return Value();
  }

  std::vector<Value> items(const Value &v, int line) {
    switch (v.kind) {
    case Value::ListV:
      return *v.list;
    case Value::DictV: {
      std::vector<Value> keys;
      for (const auto &kv : *v.dict)
        keys.push_back(Value::of(kv.first));
      return keys;
    }
    case Value::String: {
      std::vector<Value> chars;
      for (std::string &c : codePoints(v.text))
        chars.push_back(Value::of(std::move(c)));
      return chars;
    }
    case Value::Undefined:
      return {};
    default:
      fail(std::string("cannot iterate over a ") + kindName(v), line);
    }
  }

  void loop(const Node &n) {
    std::vector<Value> all = items(eval(*n.expr), n.line);
    scopes.emplace_back();
    std::vector<Value> kept;
    for (Value &v : all) {
      if (n.filter) {
        bind(n, v);
        if (!truthy(eval(*n.filter)))
          continue;
      }
      kept.push_back(std::move(v));
    }
    ++loops;
    int64_t length = int64_t(kept.size());
    for (int64_t i = 0; i < length; ++i) {
      scopes.back().clear();
      bind(n, kept[size_t(i)]);
      Dict info{{"index", Value::of(i + 1)},
                {"index0", Value::of(i)},
                {"revindex", Value::of(length - i)},
                {"revindex0", Value::of(length - i - 1)},
                {"first", Value::of(i == 0)},
                {"last", Value::of(i == length - 1)},
                {"length", Value::of(length)}};
      if (i > 0)
        info["previtem"] = kept[size_t(i - 1)];
      if (i + 1 < length)
        info["nextitem"] = kept[size_t(i + 1)];
      scopes.back()["loop"] = Value::ofDict(std::move(info));
      try {
        render(*n.body[0]);
      } catch (const LoopControl &c) {
        if (c.isBreak)
          break;
      }
    }
    --loops;
    scopes.pop_back();
    if (kept.empty() && n.elseBody)
      render(*n.elseBody);
  }

  void bind(const Node &n, const Value &v) {
    if (n.targets.size() == 1) {
      scopes.back()[n.targets[0]] = v;
      return;
    }
    if (v.kind != Value::ListV || v.list->size() != n.targets.size())
      fail("cannot unpack " + repr(v) + " into " +
               std::to_string(n.targets.size()) + " names",
           n.line);
    for (size_t k = 0; k < n.targets.size(); ++k)
      scopes.back()[n.targets[k]] = (*v.list)[k];
  }

  std::vector<Value> evalArgs(const Expr &e, size_t from) {
    std::vector<Value> args;
    for (size_t i = from; i < e.args.size(); ++i)
      args.push_back(eval(*e.args[i]));
    return args;
  }
  Value kwarg(const Expr &e, StringRef key, const std::vector<Value> &args,
              size_t position, Value fallback) {
    for (const auto &[k, x] : e.kwargs)
      if (k == key)
        return eval(*x);
    return position < args.size() ? args[position] : fallback;
  }
  std::string stringArg(const Value &v, const Expr &e, StringRef what) {
    if (v.kind != Value::String)
      fail(what.str() + " takes a string, not a " + kindName(v), e.line);
    return v.text;
  }

  /// An expression's value, of a bounded size: a template that doubles a
  /// string or a list in a loop stops here.
  Value eval(const Expr &e) {
    Value v = evalUnchecked(e);
    if ((v.kind == Value::String && v.text.size() > kMaxOutput) ||
        (v.kind == Value::ListV && v.list->size() > kMaxItems))
      fail("a value grows past the renderer's limits", e.line);
    return v;
  }

  Value evalUnchecked(const Expr &e) {
    step(e.line);
    switch (e.kind) {
    case Expr::Literal:
      return e.literal;
    case Expr::Name:
      return lookup(e.name, e.line);
    case Expr::Attr:
      return attribute(eval(*e.args[0]), e.name, e);
    case Expr::Index:
      return index(eval(*e.args[0]), eval(*e.args[1]), e);
    case Expr::Slice:
      return slice(e);
    case Expr::Call:
      return call(e);
    case Expr::Filter:
      return filter(e);
    case Expr::Test: {
      bool result = test(e);
      return Value::of(e.negated ? !result : result);
    }
    case Expr::Unary: {
      Value v = eval(*e.args[0]);
      if (!v.isNumber())
        fail(std::string("a unary ") + e.name + " of a " + kindName(v), e.line);
      if (e.name == "+")
        return v;
      return v.kind == Value::Float ? Value::ofReal(-v.real)
                                    : Value::of(-int64_t(v.number()));
    }
    case Expr::Binary:
      return binary(e.name, eval(*e.args[0]), eval(*e.args[1]), e);
    case Expr::And: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    case Expr::Or: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    case Expr::Not:
      return Value::of(!truthy(eval(*e.args[0])));
    case Expr::Cond:
      if (truthy(eval(*e.args[1])))
        return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value();
    case Expr::ListLit:
      return Value::ofList(evalArgs(e, 0));
    case Expr::DictLit: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2)
        d[str(eval(*e.args[i]))] = eval(*e.args[i + 1]);
      return Value::ofDict(std::move(d));
    }
    }
    return Value();
  }

  Value attribute(const Value &v, const std::string &name, const Expr &e) {
    if (v.kind == Value::DictV) {
      auto it = v.dict->find(name);
      return it == v.dict->end() ? Value() : it->second;
    }
    if (v.kind == Value::Undefined)
      fail("'" + name + "' of an undefined value", e.line);
    if (v.kind == Value::ListV && !name.empty() && llvm::isDigit(name[0]))
      return index(v, Value::of(int64_t(std::stoll(name))), e);
    return Value();
  }

  Value index(const Value &v, const Value &key, const Expr &e) {
    if (v.kind == Value::DictV) {
      auto it = v.dict->find(key.kind == Value::String ? key.text : str(key));
      return it == v.dict->end() ? Value() : it->second;
    }
    if (v.kind == Value::Undefined)
      fail("an index of an undefined value", e.line);
    if ((v.kind == Value::ListV || v.kind == Value::String) &&
        (key.kind == Value::Int || key.kind == Value::Bool)) {
      std::vector<Value> all = items(v, e.line);
      int64_t i = key.kind == Value::Bool ? key.boolean : key.integer;
      if (i < 0)
        i += int64_t(all.size());
      if (i < 0 || i >= int64_t(all.size()))
        return Value();
      return all[size_t(i)];
    }
    if (v.kind == Value::String || v.kind == Value::ListV)
      return Value();
    fail(std::string("cannot index a ") + kindName(v), e.line);
  }

  Value slice(const Expr &e) {
    Value v = eval(*e.args[0]);
    if (v.kind != Value::ListV && v.kind != Value::String)
      fail(std::string("cannot slice a ") + kindName(v), e.line);
    std::vector<Value> all = items(v, e.line);
    int64_t n = int64_t(all.size());
    auto bound =
        [&](const std::unique_ptr<Expr> &x,
            std::optional<int64_t> fallback) -> std::optional<int64_t> {
      if (!x)
        return fallback;
      Value b = eval(*x);
      if (b.kind == Value::None)
        return fallback;
      if (b.kind != Value::Int)
        fail("slice indices must be integers", e.line);
      return b.integer;
    };
    int64_t stepBy = bound(e.args[3], 1).value_or(1);
    if (stepBy == 0)
      fail("a slice step of 0", e.line);
    auto clamp = [&](int64_t i, bool forward) {
      if (i < 0)
        i += n;
      return forward ? std::clamp<int64_t>(i, 0, n)
                     : std::clamp<int64_t>(i, -1, n - 1);
    };
    bool fwd = stepBy > 0;
    std::optional<int64_t> s = bound(e.args[1], std::nullopt),
                           t = bound(e.args[2], std::nullopt);
    int64_t start = s ? clamp(*s, fwd) : (fwd ? 0 : n - 1);
    int64_t stop = t ? clamp(*t, fwd) : (fwd ? n : -1);
    std::vector<Value> picked;
    for (int64_t i = start; fwd ? i < stop : i > stop; i += stepBy)
      picked.push_back(all[size_t(i)]);
    if (v.kind == Value::ListV)
      return Value::ofList(std::move(picked));
    std::string text;
    for (const Value &c : picked)
      text += c.text;
    return Value::of(text);
  }

  Value binary(const std::string &op, const Value &a, const Value &b,
               const Expr &e) {
    if (op == "==")
      return Value::of(equal(a, b));
    if (op == "!=")
      return Value::of(!equal(a, b));
    if (op == "~")
      return Value::of(str(a) + str(b));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.kind == Value::String) {
        if (a.kind != Value::String)
          fail("'in <string>' needs a string on its left", e.line);
        found = StringRef(b.text).contains(a.text);
      } else if (b.kind == Value::DictV) {
        found = a.kind == Value::String && b.dict->count(a.text);
      } else if (b.kind == Value::ListV) {
        for (const Value &x : *b.list)
          found |= equal(a, x);
      } else if (b.kind != Value::Undefined) {
        fail(std::string("'in' a ") + kindName(b), e.line);
      }
      return Value::of(op == "in" ? found : !found);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int order = 0;
      if (a.isNumber() && b.isNumber())
        order = a.number() < b.number() ? -1 : a.number() > b.number();
      else if (a.kind == Value::String && b.kind == Value::String)
        order = a.text.compare(b.text) < 0 ? -1 : a.text != b.text;
      else
        fail(std::string("cannot compare a ") + kindName(a) + " with a " +
                 kindName(b),
             e.line);
      return Value::of(op == "<"    ? order < 0
                       : op == ">"  ? order > 0
                       : op == "<=" ? order <= 0
                                    : order >= 0);
    }
    if (op == "+") {
      if (a.kind == Value::String && b.kind == Value::String)
        return Value::of(a.text + b.text);
      if (a.kind == Value::ListV && b.kind == Value::ListV) {
        List joined = *a.list;
        joined.insert(joined.end(), b.list->begin(), b.list->end());
        return Value::ofList(std::move(joined));
      }
    }
    if (op == "*" && ((a.kind == Value::String && b.kind == Value::Int) ||
                      (a.kind == Value::Int && b.kind == Value::String))) {
      const Value &s = a.kind == Value::String ? a : b;
      int64_t times = a.kind == Value::Int ? a.integer : b.integer;
      if (times * int64_t(s.text.size()) > int64_t(kMaxOutput))
        fail("a repeated string grows past 16 MiB", e.line);
      std::string text;
      for (int64_t i = 0; i < times; ++i)
        text += s.text;
      return Value::of(text);
    }
    if (!a.isNumber() || !b.isNumber())
      fail(std::string("unsupported operands of '") + op + "': " + kindName(a) +
               " and " + kindName(b),
           e.line);
    bool integers = a.kind != Value::Float && b.kind != Value::Float;
    double x = a.number(), y = b.number();
    if (op == "/") {
      if (y == 0)
        fail("division by zero", e.line);
      return Value::ofReal(x / y);
    }
    if (integers) {
      int64_t i = int64_t(x), j = int64_t(y);
      if (op == "+")
        return Value::of(i + j);
      if (op == "-")
        return Value::of(i - j);
      if (op == "*")
        return Value::of(i * j);
      if (op == "//" || op == "%") {
        if (j == 0)
          fail("division by zero", e.line);
        int64_t q = i / j, r = i % j;
        if (r != 0 && ((r < 0) != (j < 0))) {
          --q;
          r += j;
        }
        return Value::of(op == "//" ? q : r);
      }
      if (op == "**" && j >= 0) {
        int64_t p = 1;
        for (int64_t k = 0; k < j && k < 64; ++k)
          p *= i;
        return Value::of(p);
      }
    }
    if (op == "+")
      return Value::ofReal(x + y);
    if (op == "-")
      return Value::ofReal(x - y);
    if (op == "*")
      return Value::ofReal(x * y);
    if (op == "//" || op == "%") {
      if (y == 0)
        fail("division by zero", e.line);
      double q = std::floor(x / y);
      return Value::ofReal(op == "//" ? q : x - q * y);
    }
    return Value::ofReal(std::pow(x, y));
  }

  static std::string strip(StringRef s, int sides, const Value &chars) {
    StringRef set = chars.kind == Value::String ? StringRef(chars.text)
                                                : StringRef(" \t\n\r\f\v");
    if (sides & 1)
      s = s.ltrim(set);
    if (sides & 2)
      s = s.rtrim(set);
    return s.str();
  }

  Value split(const std::string &s, const Value &sep, int64_t limit) {
    List parts;
    if (sep.kind == Value::String && !sep.text.empty()) {
      StringRef rest = s;
      while (limit-- != 0) {
        size_t at = rest.find(sep.text);
        if (at == StringRef::npos)
          break;
        parts.push_back(Value::of(rest.substr(0, at).str()));
        rest = rest.substr(at + sep.text.size());
      }
      parts.push_back(Value::of(rest.str()));
      return Value::ofList(std::move(parts));
    }
    StringRef rest = StringRef(s).ltrim(" \t\n\r\f\v");
    while (!rest.empty()) {
      if (limit-- == 0) {
        parts.push_back(Value::of(rest.rtrim(" \t\n\r\f\v").str()));
        break;
      }
      size_t end = rest.find_first_of(" \t\n\r\f\v");
      parts.push_back(Value::of(rest.substr(0, end).str()));
      rest = end == StringRef::npos ? StringRef()
                                    : rest.substr(end).ltrim(" \t\n\r\f\v");
    }
    return Value::ofList(std::move(parts));
  }

  static std::string replaceAll(std::string s, const std::string &from,
                                const std::string &to, int64_t count) {
    if (from.empty())
      return s;
    std::string out;
    size_t pos = 0;
    while (count-- != 0) {
      size_t at = s.find(from, pos);
      if (at == std::string::npos)
        break;
      out += s.substr(pos, at - pos) + to;
      pos = at + from.size();
    }
    return out + s.substr(pos);
  }

  static std::string titleCase(StringRef s, bool everyWord) {
    std::string out;
    bool start = true;
    for (char c : s) {
      out += start ? llvm::toUpper(c) : llvm::toLower(c);
      start = everyWord ? !llvm::isAlnum(c) : false;
    }
    return out;
  }

  Value call(const Expr &e) {
    const Expr &callee = *e.args[0];
    std::vector<Value> args = evalArgs(e, 1);
    if (callee.kind == Expr::Name) {
      const std::string &f = callee.name;
      if (f == "raise_exception")
        fail(args.empty() ? "raise_exception()" : str(args[0]), e.line);
      if (f == "namespace" || f == "dict") {
        Value ns = Value::ofDict({});
        ns.isNamespace = f == "namespace";
        for (const auto &[k, x] : e.kwargs)
          (*ns.dict)[k] = eval(*x);
        return ns;
      }
      if (f == "range") {
        int64_t from = 0, to = 0, by = 1;
        for (const Value &a : args)
          if (a.kind != Value::Int)
            fail("range() takes integers", e.line);
        if (args.size() == 1)
          to = args[0].integer;
        else if (args.size() >= 2)
          from = args[0].integer, to = args[1].integer;
        if (args.size() == 3)
          by = args[2].integer;
        if (by == 0 || args.empty() || args.size() > 3)
          fail("range() takes 1 to 3 integers, its step not 0", e.line);
        List out;
        for (int64_t i = from; by > 0 ? i < to : i > to; i += by) {
          if (out.size() >= kMaxItems)
            fail("range() past the renderer's limits", e.line);
          out.push_back(Value::of(i));
          step(e.line);
        }
        return Value::ofList(std::move(out));
      }
      if (f == "strftime_now") {
        std::time_t now = std::time(nullptr);
        std::tm local{};
        localtime_r(&now, &local);
        char buffer[256];
        std::string format =
            args.empty() ? "" : stringArg(args[0], e, "strftime_now");
        size_t n = std::strftime(buffer, sizeof buffer, format.c_str(), &local);
        return Value::of(std::string(buffer, n));
      }
      fail("the function '" + f + "' is not supported", e.line);
    }
    if (callee.kind != Expr::Attr)
      fail("only functions and methods can be called", e.line);
    Value self = eval(*callee.args[0]);
    const std::string &m = callee.name;
    auto arg = [&](size_t i) { return i < args.size() ? args[i] : Value(); };
    if (self.kind == Value::String) {
      const std::string &s = self.text;
      if (m == "strip")
        return Value::of(strip(s, 3, arg(0)));
      if (m == "lstrip")
        return Value::of(strip(s, 1, arg(0)));
      if (m == "rstrip")
        return Value::of(strip(s, 2, arg(0)));
      if (m == "upper")
        return Value::of(StringRef(s).upper());
      if (m == "lower")
        return Value::of(StringRef(s).lower());
      if (m == "title" || m == "capitalize")
        return Value::of(titleCase(s, m == "title"));
      if (m == "startswith" || m == "endswith") {
        std::vector<Value> options = arg(0).kind == Value::ListV
                                         ? *arg(0).list
                                         : std::vector<Value>{arg(0)};
        bool found = false;
        for (const Value &o : options) {
          std::string x = stringArg(o, e, m);
          found |= m == "startswith" ? StringRef(s).starts_with(x)
                                     : StringRef(s).ends_with(x);
        }
        return Value::of(found);
      }
      if (m == "split")
        return split(s, arg(0),
                     arg(1).kind == Value::Int ? arg(1).integer : -1);
      if (m == "replace")
        return Value::of(
            replaceAll(s, stringArg(arg(0), e, m), stringArg(arg(1), e, m),
                       arg(2).kind == Value::Int ? arg(2).integer : -1));
      if (m == "find") {
        size_t at = s.find(stringArg(arg(0), e, m));
        return Value::of(at == std::string::npos ? int64_t(-1) : int64_t(at));
      }
      if (m == "count")
        return Value::of(int64_t(StringRef(s).count(stringArg(arg(0), e, m))));
      if (m == "join") {
        std::string out;
        std::vector<Value> all = items(arg(0), e.line);
        for (size_t i = 0; i < all.size(); ++i)
          out += (i ? s : "") + str(all[i]);
        return Value::of(out);
      }
      if (m == "splitlines") {
        Value lines = split(s, Value::of(std::string("\n")), -1);
        if (!lines.list->empty() && lines.list->back().text.empty())
          lines.list->pop_back();
        return lines;
      }
    }
    if (self.kind == Value::DictV) {
      if (m == "get") {
        auto it = self.dict->find(str(arg(0)));
        return it != self.dict->end() ? it->second
               : args.size() > 1      ? args[1]
                                      : Value::none();
      }
      if (m == "items" || m == "keys" || m == "values") {
        List out;
        for (const auto &[k, x] : *self.dict)
          out.push_back(m == "keys"     ? Value::of(k)
                        : m == "values" ? x
                                        : Value::ofList({Value::of(k), x}));
        return Value::ofList(std::move(out));
      }
    }
    if (self.kind == Value::ListV && m == "append") {
      if (self.list->size() >= kMaxItems)
        fail("a list grows past the renderer's limits", e.line);
      self.list->push_back(arg(0));
      return Value::none();
    }
    fail(std::string("the method '") + m + "' of a " + kindName(self) +
             " is not supported",
         e.line);
  }

  bool test(const Expr &e) {
    Value v = eval(*e.args[0]);
    std::vector<Value> args = evalArgs(e, 1);
    const std::string &t = e.name;
    if (t == "defined")
      return v.kind != Value::Undefined;
    if (t == "undefined")
      return v.kind == Value::Undefined;
    if (t == "none")
      return v.kind == Value::None;
    if (t == "boolean")
      return v.kind == Value::Bool;
    if (t == "true" || t == "false")
      return v.kind == Value::Bool && v.boolean == (t == "true");
    if (t == "integer")
      return v.kind == Value::Int;
    if (t == "float")
      return v.kind == Value::Float;
    if (t == "number")
      return v.kind == Value::Int || v.kind == Value::Float;
    if (t == "string")
      return v.kind == Value::String;
    if (t == "mapping")
      return v.kind == Value::DictV;
    if (t == "sequence" || t == "iterable")
      return v.kind == Value::ListV || v.kind == Value::String ||
             v.kind == Value::DictV;
    if (t == "lower" || t == "upper")
      return v.kind == Value::String &&
             v.text == (t == "lower" ? StringRef(v.text).lower()
                                     : StringRef(v.text).upper());
    if (t == "equalto" || t == "eq" || t == "sameas")
      return !args.empty() && equal(v, args[0]);
    if (t == "ne")
      return args.empty() || !equal(v, args[0]);
    if (t == "in")
      return !args.empty() && truthy(binary("in", v, args[0], e));
    if (t == "odd" || t == "even") {
      if (v.kind != Value::Int)
        fail("'" + t + "' tests an integer", e.line);
      return (v.integer % 2 != 0) == (t == "odd");
    }
    if (t == "divisibleby")
      return v.kind == Value::Int && !args.empty() &&
             args[0].kind == Value::Int && args[0].integer != 0 &&
             v.integer % args[0].integer == 0;
    fail("the test '" + t + "' is not supported", e.line);
  }

  Value filter(const Expr &e) {
    Value v = eval(*e.args[0]);
    std::vector<Value> args = evalArgs(e, 1);
    const std::string &f = e.name;
    if (f == "trim")
      return Value::of(strip(str(v), 3, kwarg(e, "chars", args, 0, Value())));
    if (f == "length" || f == "count")
      return Value::of(int64_t(items(v, e.line).size()));
    if (f == "upper")
      return Value::of(StringRef(str(v)).upper());
    if (f == "lower")
      return Value::of(StringRef(str(v)).lower());
    if (f == "capitalize" || f == "title")
      return Value::of(titleCase(str(v), f == "title"));
    if (f == "string")
      return Value::of(str(v));
    if (f == "safe")
      return v;
    if (f == "tojson") {
      Value indent = kwarg(e, "indent", args, 0, Value::none());
      std::string text;
      toJson(v, indent.kind == Value::Int ? int(indent.integer) : -1, 0, text);
      return Value::of(text);
    }
    if (f == "default" || f == "d") {
      bool boolean = truthy(kwarg(e, "boolean", args, 1, Value::of(false)));
      if (v.kind == Value::Undefined || (boolean && !truthy(v)))
        return args.empty() ? Value::of(std::string()) : args[0];
      return v;
    }
    if (f == "first" || f == "last") {
      std::vector<Value> all = items(v, e.line);
      if (all.empty())
        return Value();
      return f == "first" ? all.front() : all.back();
    }
    if (f == "join") {
      std::string sep = str(kwarg(e, "d", args, 0, Value::of(std::string())));
      std::string out;
      std::vector<Value> all = items(v, e.line);
      for (size_t i = 0; i < all.size(); ++i)
        out += (i ? sep : "") + str(all[i]);
      return Value::of(out);
    }
    if (f == "list")
      return Value::ofList(items(v, e.line));
    if (f == "reverse") {
      std::vector<Value> all = items(v, e.line);
      std::reverse(all.begin(), all.end());
      if (v.kind != Value::String)
        return Value::ofList(std::move(all));
      std::string text;
      for (const Value &c : all)
        text += c.text;
      return Value::of(text);
    }
    if (f == "replace") {
      if (args.size() < 2)
        fail("replace takes two strings", e.line);
      return Value::of(replaceAll(str(v), str(args[0]), str(args[1]),
                                  args.size() > 2 && args[2].kind == Value::Int
                                      ? args[2].integer
                                      : -1));
    }
    if (f == "int") {
      if (v.isNumber())
        return Value::of(int64_t(v.number()));
      int64_t i = 0;
      if (v.kind == Value::String &&
          !StringRef(v.text).trim().getAsInteger(10, i))
        return Value::of(i);
      return args.empty() ? Value::of(int64_t(0)) : args[0];
    }
    if (f == "float") {
      if (v.isNumber())
        return Value::ofReal(v.number());
      double d = 0;
      if (v.kind == Value::String && !StringRef(v.text).trim().getAsDouble(d))
        return Value::ofReal(d);
      return Value::ofReal(0);
    }
    if (f == "abs") {
      if (!v.isNumber())
        fail("abs of a " + std::string(kindName(v)), e.line);
      return v.kind == Value::Float ? Value::ofReal(std::fabs(v.real))
                                    : Value::of(std::abs(int64_t(v.number())));
    }
    if (f == "items") {
      if (v.kind != Value::DictV)
        fail("items of a " + std::string(kindName(v)), e.line);
      List out;
      for (const auto &[k, x] : *v.dict)
        out.push_back(Value::ofList({Value::of(k), x}));
      return Value::ofList(std::move(out));
    }
    if (f == "selectattr" || f == "rejectattr" || f == "map") {
      if (args.empty() && f != "map")
        fail(f + " needs an attribute", e.line);
      std::vector<Value> all = items(v, e.line);
      List out;
      if (f == "map") {
        Value name = kwarg(e, "attribute", {}, 0, Value());
        if (name.kind != Value::String)
          fail("map is supported with attribute= only", e.line);
        for (const Value &x : all)
          out.push_back(attribute(x, name.text, e));
        return Value::ofList(std::move(out));
      }
      std::string name = str(args[0]);
      for (const Value &x : all) {
        Value a = attribute(x, name, e);
        bool keep;
        if (args.size() == 1) {
          keep = truthy(a);
        } else {
          // The test and its argument, as `a is test(arg)` would take them.
          Expr probe;
          probe.kind = Expr::Test;
          probe.line = e.line;
          probe.name = str(args[1]);
          auto literal = std::make_unique<Expr>();
          literal->kind = Expr::Literal;
          literal->literal = a;
          probe.args.push_back(std::move(literal));
          for (size_t k = 2; k < args.size(); ++k) {
            auto extra = std::make_unique<Expr>();
            extra->kind = Expr::Literal;
            extra->literal = args[k];
            probe.args.push_back(std::move(extra));
          }
          keep = test(probe);
        }
        if (keep == (f == "selectattr"))
          out.push_back(x);
      }
      return Value::ofList(std::move(out));
    }
    fail("the filter '" + f + "' is not supported", e.line);
  }

  std::string &out;
  std::vector<std::map<std::string, Value>> scopes;
  int64_t steps = 0;
  int loops = 0;
};

llvm::Error errorOf(StringRef name, const Failure &f) {
  std::string where = name.str();
  if (f.line > 0)
    where += ":" + std::to_string(f.line);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 where + ": " + f.message);
}

/// A special token of a tokenizer_config.json: a string or {"content"}.
std::string tokenString(const llvm::json::Object &config, StringRef key) {
  const llvm::json::Value *v = config.get(key);
  if (!v)
    return "";
  if (std::optional<StringRef> s = v->getAsString())
    return s->str();
  if (const llvm::json::Object *o = v->getAsObject())
    if (std::optional<StringRef> s = o->getString("content"))
      return s->str();
  return "";
}
} // namespace

ChatTemplate::ChatTemplate(ChatTemplate &&) noexcept = default;
ChatTemplate &ChatTemplate::operator=(ChatTemplate &&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

llvm::Expected<ChatTemplate> ChatTemplate::parse(StringRef source,
                                                 StringRef name) {
  ChatTemplate t;
  t.templateName = name.str();
  try {
    TemplateParser parser(segment(source));
    t.root = parser.parse();
  } catch (const Failure &f) {
    return errorOf(name, f);
  }
  return t;
}

llvm::Expected<ChatTemplate> ChatTemplate::fromTokenizerConfig(StringRef path) {
  auto failed = [&](const std::string &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + message);
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return failed("cannot read it: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return failed("not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *config = json->getAsObject();
  if (!config)
    return failed("a tokenizer config must be a JSON object");
  const llvm::json::Value *source = config->get("chat_template");
  std::string text;
  if (source && source->getAsString()) {
    text = source->getAsString()->str();
  } else if (const llvm::json::Array *named =
                 source ? source->getAsArray() : nullptr) {
    for (const llvm::json::Value &entry : *named)
      if (const llvm::json::Object *o = entry.getAsObject())
        if (o->getString("name") == StringRef("default"))
          if (std::optional<StringRef> t = o->getString("template"))
            text = t->str();
    if (text.empty())
      return failed("its chat_template list has no \"default\" template");
  } else {
    return failed("no chat_template (give one with --chat-template)");
  }
  llvm::Expected<ChatTemplate> t = parse(text, path);
  if (!t)
    return t.takeError();
  t->bosToken = tokenString(*config, "bos_token");
  t->eosToken = tokenString(*config, "eos_token");
  return t;
}

llvm::Expected<ChatTemplate> ChatTemplate::fromFile(StringRef path) {
  if (path.ends_with(".json"))
    return fromTokenizerConfig(path);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> source =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!source)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": cannot read it: " +
                                       source.getError().message());
  return parse((*source)->getBuffer(), path);
}

llvm::Expected<std::string>
ChatTemplate::render(const llvm::json::Object &variables) const {
  std::string out;
  Renderer r(out);
  r.define("bos_token", Value::of(bosToken));
  r.define("eos_token", Value::of(eosToken));
  r.define("add_generation_prompt", Value::of(false));
  for (const auto &[k, v] : variables)
    r.define(k.str(), fromJson(v));
  try {
    r.render(*root);
  } catch (const Failure &f) {
    return errorOf(templateName, f);
  } catch (const LoopControl &) {
    return errorOf(templateName, {"'break' or 'continue' outside a loop", 0});
  }
  return out;
}
