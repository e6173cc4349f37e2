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
                           T2O_VERIFY_FIXTURES="${T2O_VERIFY_FIXTURES}" T2O_TORCH_FIXTURES="${T2O_TORCH_FIXTURES}")
add_test(NAME verify_e2e COMMAND verify_e2e_test --gtest_filter=VerifyE2E.*)
set_tests_properties(verify_e2e PROPERTIES FIXTURES_REQUIRED verify_fixtures LABELS e2e TIMEOUT 900)
# verify passes on every converter fixture (tests/models/fixtures.py).
add_test(NAME verify_converter_fixtures COMMAND verify_e2e_test --gtest_filter=*VerifyFixtures*)
set_tests_properties(verify_converter_fixtures PROPERTIES FIXTURES_REQUIRED torch_fixtures LABELS e2e TIMEOUT 3600)
