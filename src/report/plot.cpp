// Small inline SVG plots for the report (no charting library: a bar chart is a few rectangles).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/report.h"

namespace t2o {

std::string histogram_svg(const std::vector<std::string>& labels, const std::vector<int64_t>& counts,
                          const std::string& x_title) {
  const int bar = 34, gap = 4, left = 8, top = 18, plot_h = 120, label_h = 48;
  size_t n = std::min(labels.size(), counts.size());
  int width = left * 2 + static_cast<int>(n) * (bar + gap);
  int height = top + plot_h + label_h + 16;
  int64_t peak = 1;
  for (size_t i = 0; i < n; ++i) peak = std::max(peak, counts[i]);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg class=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "role=\"img\">",
                width, height, width, height);
  std::string s = buf;
  for (size_t i = 0; i < n; ++i) {
    int x = left + static_cast<int>(i) * (bar + gap);
    // Square-root heights keep small but non-zero bins visible next to a tall one.
    double share = counts[i] > 0 ? std::max(0.02, std::sqrt(static_cast<double>(counts[i]) / static_cast<double>(peak))) : 0;
    int h = static_cast<int>(share * plot_h);
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#8fb3e6\"><title>%s: %lld</title></rect>"
                  "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%lld</text>",
                  x, top + plot_h - h, bar, h, html_escape(labels[i]).c_str(), static_cast<long long>(counts[i]),
                  x + bar / 2, top + plot_h - h - 3, static_cast<long long>(counts[i]));
    s += buf;
    std::snprintf(buf, sizeof buf,
                  "<text transform=\"translate(%d %d) rotate(-45)\" text-anchor=\"end\">%s</text>", x + bar / 2 + 4,
                  top + plot_h + 12, html_escape(labels[i]).c_str());
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555\"/>", left, top + plot_h,
                width - left, top + plot_h);
  s += buf;
  std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>", width / 2, height - 2,
                html_escape(x_title).c_str());
  s += buf;
  return s + "</svg>";
}

std::string scatter_svg(const std::vector<std::pair<double, double>>& points, const std::string& x_title,
                        const std::string& y_title) {
  const int size = 220, pad = 34;
  double lo = 0, hi = 0;
  bool first = true;
  for (const auto& [x, y] : points) {
    if (first) lo = hi = x, first = false;
    lo = std::min({lo, x, y});
    hi = std::max({hi, x, y});
  }
  if (hi <= lo) hi = lo + 1;  // constant values: any scale shows them on the diagonal
  auto px = [&](double v) { return pad + (v - lo) / (hi - lo) * size; };
  auto py = [&](double v) { return pad + size - (v - lo) / (hi - lo) * size; };
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg class=\"scatter\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "role=\"img\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>"
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#bbb\" stroke-dasharray=\"4 3\"/>",
                size + 2 * pad, size + 2 * pad, size + 2 * pad, size + 2 * pad, pad, pad, size, size, pad, pad + size,
                pad + size, pad);
  std::string s = buf;
  for (const auto& [x, y] : points) {
    std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.8\" fill=\"#0969da\" fill-opacity=\"0.6\"/>", px(x), py(y));
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%d\" y=\"%d\" text-anchor=\"start\">%.3g</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3g</text>",
                pad, pad + size + 13, lo, pad + size, pad + size + 13, hi);
  s += buf;
  std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", pad + size / 2, size + 2 * pad - 4);
  s += buf + html_escape(x_title) + "</text>";
  std::snprintf(buf, sizeof buf, "<text transform=\"translate(12 %d) rotate(-90)\" text-anchor=\"middle\">", pad + size / 2);
  s += buf + html_escape(y_title) + "</text>";
  return s + "</svg>";
}

}  // namespace t2o
