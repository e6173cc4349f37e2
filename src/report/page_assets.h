#pragma once
// The style sheet and script every report page inlines.
namespace t2o {

extern const char* const kReportCss;
extern const char* const kReportJs;

}  // namespace t2o
