# Converter tests (included from tests/CMakeLists.txt). Fixtures are built by tests/models/*.py
# with the Debian Python (torch 1.13) into the build tree when the tests run.
set(T2O_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch, for the converter fixtures")
set(T2O_TORCH_FIXTURES ${CMAKE_BINARY_DIR}/torch_fixtures)

add_executable(torch_e2e_test ${CMAKE_CURRENT_SOURCE_DIR}/e2e/torch_e2e_test.cpp)
target_link_libraries(torch_e2e_test PRIVATE t2o_verify t2o_torch t2o_onnx t2o_passes GTest::gtest_main)
target_compile_definitions(torch_e2e_test PRIVATE T2O_TORCH_FIXTURES="${T2O_TORCH_FIXTURES}"
                           T2O_ORT_RUN="${CMAKE_CURRENT_SOURCE_DIR}/interop/ort_run.js")

add_test(NAME torch_fixtures
         COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/fixtures.py ${T2O_TORCH_FIXTURES})
set_tests_properties(torch_fixtures PROPERTIES FIXTURES_SETUP torch_fixtures LABELS "e2e;interop" TIMEOUT 900)

# The fixture list is known only after the setup test ran, so the suite runs as gtest shards, one
# ctest test each (two, so that ctest -j2 keeps both cores busy). Each (fixture, opset) converts
# once; the converted file then runs in ONNX Runtime (one node process per shard) and, at opsets 11
# and 17, through `verify` against PyTorch on the t2o runtime.
foreach(shard 0 1)
  add_test(NAME torch_e2e.${shard} COMMAND torch_e2e_test --gtest_filter=*E2E.ConvertsAndMatchesOnnxRuntime/*:E2ESource.*)
  set_tests_properties(torch_e2e.${shard} PROPERTIES FIXTURES_REQUIRED torch_fixtures LABELS "e2e;interop" TIMEOUT 3600 COST 2000
                       ENVIRONMENT "GTEST_TOTAL_SHARDS=2;GTEST_SHARD_INDEX=${shard};NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
endforeach()

# Full-size torchvision classification models through the CLI, checked in ONNX Runtime at batch 1 and 3
# (a high COST starts them first under ctest -j). Registered only with the torch2onnx executable, which
# the command names. torchvision_zoo: ten architectures of different families (about 8 minutes on 2
# busy cores); torchvision_zoo_full (label slow): all 21 (about 10 minutes on 2 quiet cores).
if(TARGET torch2onnx)
  add_test(NAME torchvision_zoo
           COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/torchvision_e2e.py $<TARGET_FILE:torch2onnx>
                   alexnet resnet50 squeezenet1_1 mobilenet_v3_large shufflenet_v2_x1_0 efficientnet_b0
                   regnet_y_800mf convnext_tiny googlenet swin_t)
  set_tests_properties(torchvision_zoo PROPERTIES LABELS "long;interop" TIMEOUT 1800 COST 10000
                       ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
  add_test(NAME torchvision_zoo_full
           COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/torchvision_e2e.py $<TARGET_FILE:torch2onnx>)
  set_tests_properties(torchvision_zoo_full PROPERTIES LABELS "long;interop;slow" TIMEOUT 3600 COST 10000
                       ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
endif()

# torchvision detection/segmentation/video, torchaudio and hand-written models (tests/e2e/library_models.py)
# through the CLI at opset 17 with dynamic axes, checked in ONNX Runtime at two sizes; the models listed in
# library_models_expected.txt must pass (docs/library_models.md has the numbers, with torch.onnx beside them).
# Label `slow` (about 20 minutes on 2 cores): scripts/test.sh leaves it out unless asked (-L slow).
if(TARGET torch2onnx)
  add_test(NAME library_models
           COMMAND ${T2O_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/library_models_e2e.py $<TARGET_FILE:torch2onnx>
                   --expected ${CMAKE_CURRENT_SOURCE_DIR}/e2e/library_models_expected.txt)
  set_tests_properties(library_models PROPERTIES LABELS "long;interop;slow" TIMEOUT 3600 COST 9500
                       ENVIRONMENT "NODE_PATH=$ENV{HOME}/.cache/torch2onnx/node_modules")
endif()
