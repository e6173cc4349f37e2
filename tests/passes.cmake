# Optimizer tests beyond the unit tests (included from tests/CMakeLists.txt).
# The ONNX backend test data again, each model optimized first (all passes, no proof): every test
# that passes as given must still pass.
add_test(NAME conformance.optimized_backend_node_data
         COMMAND t2o_conformance --data ${T2O_TESTDATA} --optimize
                 --expected ${CMAKE_CURRENT_SOURCE_DIR}/conformance/expected_pass.txt
                 --write-results ${CMAKE_CURRENT_BINARY_DIR}/conformance_optimized_results.txt)
set_tests_properties(conformance.optimized_backend_node_data PROPERTIES LABELS conformance TIMEOUT 1800)

# convert-version on every converter fixture, down from 17 and up from the lowest opset, checked
# against PyTorch in ONNX Runtime (~20 minutes: ~3 conversions per fixture and opset; label slow, so
# CI's time goes to coverage.opinfo; run it with scripts/test.sh -L slow).
if(T2O_WITH_TORCH AND TARGET torch2onnx)
  add_test(NAME convert_version_fixtures
           COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/convert_version_e2e.py $<TARGET_FILE:torch2onnx>
                   ${T2O_TORCH_FIXTURES} --opsets=9,11,13)
  set_tests_properties(convert_version_fixtures PROPERTIES FIXTURES_REQUIRED torch_fixtures LABELS "long;interop;slow"
                       TIMEOUT 5400 ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
endif()
