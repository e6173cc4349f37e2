# Verify tests (included from tests/CMakeLists.txt).
# The unit test of comparison and input planning needs no libtorch: it builds those two files.
target_sources(verify_compare_test PRIVATE ${PROJECT_SOURCE_DIR}/src/verify/compare.cpp
               ${PROJECT_SOURCE_DIR}/src/verify/inputs.cpp)
if(NOT T2O_WITH_TORCH)
  return()
endif()

set(T2O_VERIFY_FIXTURES ${CMAKE_BINARY_DIR}/verify_fixtures)
add_test(NAME verify_fixtures
         COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/verify_models.py ${T2O_VERIFY_FIXTURES})
set_tests_properties(verify_fixtures PROPERTIES FIXTURES_SETUP verify_fixtures LABELS e2e TIMEOUT 300)

# End to end through the command line, as users run it.
add_executable(verify_e2e_test ${CMAKE_CURRENT_SOURCE_DIR}/e2e/verify_e2e_test.cpp)
target_link_libraries(verify_e2e_test PRIVATE t2o_onnx nlohmann_json::nlohmann_json GTest::gtest_main)
add_dependencies(verify_e2e_test torch2onnx)
target_compile_definitions(verify_e2e_test PRIVATE T2O_CLI="$<TARGET_FILE:torch2onnx>"
                           T2O_VERIFY_FIXTURES="${T2O_VERIFY_FIXTURES}")
add_test(NAME verify_e2e COMMAND verify_e2e_test --gtest_filter=VerifyE2E.*)
set_tests_properties(verify_e2e PROPERTIES FIXTURES_REQUIRED verify_fixtures LABELS e2e TIMEOUT 900)

# --report pages end to end (the graph is drawn by Graphviz's dot, a setup.sh package).
add_executable(report_e2e_test ${CMAKE_CURRENT_SOURCE_DIR}/e2e/report_e2e_test.cpp)
target_link_libraries(report_e2e_test PRIVATE t2o_onnx nlohmann_json::nlohmann_json GTest::gtest_main)
add_dependencies(report_e2e_test torch2onnx)
target_compile_definitions(report_e2e_test PRIVATE T2O_CLI="$<TARGET_FILE:torch2onnx>"
                           T2O_VERIFY_FIXTURES="${T2O_VERIFY_FIXTURES}" T2O_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                           T2O_PYTHON="${T2O_TORCH_PYTHON}")
add_test(NAME report_e2e COMMAND report_e2e_test)
set_tests_properties(report_e2e PROPERTIES FIXTURES_REQUIRED verify_fixtures LABELS e2e TIMEOUT 900)
# The same page in headless Chromium (label 'browser': about half a minute; chromium is a setup.sh package).
add_test(NAME report_browser
         COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/report/browser_test.py $<TARGET_FILE:torch2onnx>
                 ${T2O_VERIFY_FIXTURES} ${CMAKE_BINARY_DIR}/report_browser)
set_tests_properties(report_browser PROPERTIES FIXTURES_REQUIRED verify_fixtures LABELS "e2e;browser" TIMEOUT 600)
