#pragma once
// Checks shared by the report tests: a report page must open offline, alone.
#include <regex>
#include <string>
#include <vector>

namespace t2o::test {

// Every reference in the page that would load something from elsewhere (network or another
// file); empty when the page is self-contained. In-page anchors (href="#graph") are fine, and so
// are SVG namespace declarations (xmlns="http://www.w3.org/2000/svg" names, it does not load).
inline std::vector<std::string> external_refs(const std::string& html) {
  std::vector<std::string> bad;
  static const std::regex ref(R"re(<[a-zA-Z][^<>]*\s(src|href|xlink:href|action|poster|data)\s*=\s*["']?([^"'\s>]*))re",
                              std::regex::icase);
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it) {
    std::string target = (*it)[2].str();
    if (!target.empty() && target[0] == '#') continue;
    bad.push_back((*it)[0].str());
  }
  static const std::regex other(R"re(<link\b|@import|url\(\s*["']?[^#"'\s)]|<iframe\b|<object\b|<embed\b)re", std::regex::icase);
  for (auto it = std::sregex_iterator(html.begin(), html.end(), other); it != std::sregex_iterator(); ++it)
    bad.push_back((*it)[0].str());
  return bad;
}

inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

}  // namespace t2o::test
