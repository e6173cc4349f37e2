# End-to-end tests of the export pitfalls (docs/pitfalls.md), one ctest test per item:
# convert -> check -> run in our runtime and in ONNX Runtime -> compare with PyTorch.
# Fixtures are built by tests/models/pitfall_models.py at test time.
if(NOT T2O_WITH_TORCH)
  return()
endif()
set(T2O_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch, for the converter fixtures")
set(T2O_PITFALL_WORK ${CMAKE_BINARY_DIR}/pitfall_fixtures)

# The example custom op: its torch library (for the fixture) and its runtime plugin.
add_subdirectory(${PROJECT_SOURCE_DIR}/examples/custom_op ${CMAKE_BINARY_DIR}/examples/custom_op)

# Prints the converter's per-op minimum opsets as the Markdown table in docs/pitfalls.md.
add_executable(pitfall_op_table ${CMAKE_CURRENT_SOURCE_DIR}/e2e/pitfall_op_table.cpp)
target_link_libraries(pitfall_op_table PRIVATE t2o_torch)
target_include_directories(pitfall_op_table SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
target_compile_options(pitfall_op_table PRIVATE ${TORCH_CXX_FLAGS})
add_test(NAME pitfall_op_table_in_docs
         COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/pitfall_docs_table.py
                 $<TARGET_FILE:pitfall_op_table> ${PROJECT_SOURCE_DIR}/docs/pitfalls.md)
set_tests_properties(pitfall_op_table_in_docs PROPERTIES LABELS e2e)

foreach(item cells mv_dot_outer spectral train_mode custom_op weights cuda opset resize dynamic_cnn dynamic_nlp)
  add_test(NAME pitfall_${item}
           COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/pitfall_e2e.py ${item}
                   --cli $<TARGET_FILE:torch2onnx> --work ${T2O_PITFALL_WORK}
                   --torch-lib $<TARGET_FILE:cbr_torch> --plugin $<TARGET_FILE:cbr_plugin>)
  set_tests_properties(pitfall_${item} PROPERTIES LABELS "e2e;interop" TIMEOUT 900
                       ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
endforeach()
