# Coverage against test sources we did not write (label 'coverage;long'):
#  - coverage.opinfo: every PyTorch OpInfo / ModuleInfo (torch.testing._internal, Debian's torch 1.13) with
#    CPU samples, converted at opsets 13 and 17 and run in ONNX Runtime and in our runtime; torch.onnx 1.13
#    is measured on the same samples. Expected passes are checked in (coverage/expected_pass.txt).
#  - coverage.symbolics: every aten op torch.onnx 1.13 has a symbolic for has a converter or a written reason.
if(NOT T2O_WITH_TORCH OR NOT TARGET torch2onnx)
  return()
endif()
set(T2O_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch, for the converter fixtures")

add_executable(t2o_list_ops ${CMAKE_CURRENT_SOURCE_DIR}/coverage/list_ops.cpp)
target_link_libraries(t2o_list_ops PRIVATE t2o_torch)
target_include_directories(t2o_list_ops SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
target_compile_options(t2o_list_ops PRIVATE ${TORCH_CXX_FLAGS})

# Our runtime for many small models from one process (no libtorch start-up per model).
add_executable(t2o_rt_server ${CMAKE_CURRENT_SOURCE_DIR}/coverage/rt_server.cpp)
target_link_libraries(t2o_rt_server PRIVATE t2o_onnx t2o_runtime)

set(T2O_COVERAGE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/coverage)
# The expected-pass list comes from a first full run with --update (see coverage/README.md); until it
# is checked in, the test is not registered (every failure would be "unexplained").
if(EXISTS ${T2O_COVERAGE_DIR}/expected_pass.txt)
  # The default labels check one fixed quarter of the entries (by crc32 of the name) without measuring
  # torch.onnx, about 6 minutes; coverage.opinfo_full (label slow, about 35 minutes) checks every entry and
  # measures torch.onnx for the comparison in the README.
  set(T2O_OPINFO_ARGS ${T2O_TORCH_PYTHON} ${T2O_COVERAGE_DIR}/opinfo_coverage.py
      --t2o $<TARGET_FILE:torch2onnx> --rt-server $<TARGET_FILE:t2o_rt_server> --jobs 2)
  add_test(NAME coverage.opinfo
           COMMAND ${T2O_OPINFO_ARGS} --work ${CMAKE_BINARY_DIR}/coverage-shard --shard 0/4 --no-torch-onnx)
  set_tests_properties(coverage.opinfo PROPERTIES LABELS "coverage;long;interop" TIMEOUT 1800 COST 3000
                       ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
  add_test(NAME coverage.opinfo_full COMMAND ${T2O_OPINFO_ARGS} --work ${CMAKE_BINARY_DIR}/coverage)
  set_tests_properties(coverage.opinfo_full PROPERTIES LABELS "coverage;slow;interop" TIMEOUT 3600 COST 9000
                       ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
endif()
add_test(NAME coverage.symbolics
         COMMAND ${T2O_TORCH_PYTHON} ${T2O_COVERAGE_DIR}/symbolic_coverage.py --list-ops $<TARGET_FILE:t2o_list_ops>)
set_tests_properties(coverage.symbolics PROPERTIES LABELS "coverage")
