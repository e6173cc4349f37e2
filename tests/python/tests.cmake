# Python tests (pytest, label `python`): the torch2onnx package from ${CMAKE_BINARY_DIR}/python.
if(NOT T2O_WITH_TORCH)
  return()
endif()
set(T2O_PY_TESTS ${CMAKE_CURRENT_LIST_DIR})

# The example custom-op plugin's kernel under the seed snippet's name onnx_test::cbr.
add_library(t2o_test_cbr_alias MODULE ${T2O_PY_TESTS}/cbr_alias_plugin.cpp)
target_include_directories(t2o_test_cbr_alias PRIVATE ${PROJECT_SOURCE_DIR}/examples/custom_op ${T2O_SRC}/runtime)

foreach(name package session export functions seed_snippets triton quantized_export model_forms op_families quantize)
  add_test(NAME python_${name}
           COMMAND ${T2O_TORCH_PYTHON} -m pytest -q -p no:cacheprovider ${T2O_PY_TESTS}/test_${name}.py)
  set_tests_properties(python_${name} PROPERTIES LABELS python TIMEOUT 900 ENVIRONMENT
    "PYTHONPATH=${CMAKE_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1;T2O_CLI=$<TARGET_FILE:torch2onnx>;T2O_CBR_ALIAS_PLUGIN=$<TARGET_FILE:t2o_test_cbr_alias>;NODE_PATH=${T2O_CACHE_DIR}/node_modules;OMP_WAIT_POLICY=passive")
endforeach()
