# Conformance over the ONNX backend test data (label 'conformance').
add_executable(t2o_conformance ${CMAKE_CURRENT_SOURCE_DIR}/conformance/conformance.cpp)
target_link_libraries(t2o_conformance PRIVATE t2o_onnx t2o_runtime t2o_passes)
add_test(NAME conformance.backend_node_data
         COMMAND t2o_conformance --data ${T2O_TESTDATA}
                 --expected ${CMAKE_CURRENT_SOURCE_DIR}/conformance/expected_pass.txt
                 --write-results ${CMAKE_CURRENT_BINARY_DIR}/conformance_results.txt)
set_tests_properties(conformance.backend_node_data PROPERTIES LABELS conformance TIMEOUT 1800)
