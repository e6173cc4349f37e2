# `cmake --install` into a temporary prefix, then a project outside the tree built against it
# (find_package(torch2onnx) and pkg-config) runs a model.
add_test(NAME install_package
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} /usr/bin/python3)
set_tests_properties(install_package PROPERTIES LABELS e2e TIMEOUT 600)
