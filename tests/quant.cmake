# Quantizer tests (included from tests/CMakeLists.txt): unit tests of t2o_quant and its command,
# and a check that ONNX Runtime runs the quantized files as our runtime does.
foreach(name quant_test quant_rnn_test quant_cli_test quant_interop_test fp16_test)
  add_executable(${name} ${CMAKE_CURRENT_SOURCE_DIR}/quant/${name}.cpp)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit ${CMAKE_CURRENT_SOURCE_DIR}/quant)
  target_link_libraries(${name} PRIVATE t2o_quant t2o_passes t2o_onnx t2o_runtime t2o_ir GTest::gtest_main nlohmann_json::nlohmann_json)
  target_compile_definitions(${name} PRIVATE T2O_CLI="$<TARGET_FILE:torch2onnx>"
                             T2O_ORT_RUN="${CMAKE_CURRENT_SOURCE_DIR}/interop/ort_run.js" T2O_PYTHON="${T2O_TORCH_PYTHON}")
  if(T2O_WITH_TORCH)
    target_compile_definitions(${name} PRIVATE T2O_WITH_TORCH=1)
  endif()
endforeach()
gtest_discover_tests(quant_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
gtest_discover_tests(quant_rnn_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
gtest_discover_tests(quant_cli_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
gtest_discover_tests(fp16_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
gtest_discover_tests(quant_interop_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS interop
                     ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
# The int8 rewrites as on a CPU without VNNI (oneDNN capped at AVX-512 core): dynamic convs run as
# float convs on the dequantized values there.
add_test(NAME QuantRuntime.WithoutVnni COMMAND quant_test --gtest_filter=QuantRuntime.Dynamic*:QuantDynamic.*)
set_tests_properties(QuantRuntime.WithoutVnni PROPERTIES LABELS unit ENVIRONMENT "ONEDNN_MAX_CPU_ISA=AVX512_CORE")
