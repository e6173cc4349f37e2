# `cmake --install`: headers, two shared libraries and a CMake package (plus pkg-config files),
# so an outside project can use find_package(torch2onnx):
#   torch2onnx::runtime    libtorch2onnx_runtime.so: run ONNX models (the IR, ONNX I/O, runtime,
#                          optimizer and serving bundles); needs oneDNN, ONNX and protobuf, never libtorch
#   torch2onnx::converter  libtorch2onnx_converter.so: convert and verify TorchScript (links libtorch;
#                          its headers do not include libtorch's)
# The shared libraries are made of the static libraries the tools use, whole.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(T2O_INSTALL_INCLUDE ${CMAKE_INSTALL_INCLUDEDIR}/torch2onnx)
set(T2O_INSTALL_CMAKE ${CMAKE_INSTALL_LIBDIR}/cmake/torch2onnx)

# Links the given static targets whole into `target` (their objects, not just what is referenced).
function(t2o_link_whole target)
  set(archives)
  foreach(lib ${ARGN})
    list(APPEND archives $<TARGET_FILE:${lib}>)
    add_dependencies(${target} ${lib})
  endforeach()
  target_link_options(${target} PRIVATE LINKER:--whole-archive ${archives} LINKER:--no-whole-archive)
  # Relink when an archive changes (add_dependencies only orders the builds).
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${archives})
endfunction()

add_library(torch2onnx_runtime SHARED ${CMAKE_CURRENT_LIST_DIR}/version.cpp)
t2o_link_whole(torch2onnx_runtime t2o_ir t2o_onnx t2o_runtime t2o_passes t2o_serve)
target_link_libraries(torch2onnx_runtime PRIVATE onnx onnx_proto protobuf::libprotobuf DNNL::dnnl OpenMP::OpenMP_CXX
                      ${CMAKE_DL_LIBS})
target_include_directories(torch2onnx_runtime PUBLIC $<BUILD_INTERFACE:${T2O_SRC}>
                           $<INSTALL_INTERFACE:${T2O_INSTALL_INCLUDE}>)
target_compile_features(torch2onnx_runtime PUBLIC cxx_std_20)
target_compile_definitions(torch2onnx_runtime PRIVATE T2O_VERSION="${PROJECT_VERSION}" T2O_VERSION_FN=torch2onnx_runtime_version)
set_target_properties(torch2onnx_runtime PROPERTIES EXPORT_NAME runtime VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR})
set(T2O_INSTALL_TARGETS torch2onnx_runtime)
set(T2O_INSTALL_HEADERS ir/dtype.h ir/error.h ir/graph.h ir/tensor.h onnx/model_io.h onnx/tensor_io.h onnx/check.h
    runtime/session.h runtime/value.h runtime/value_io.h runtime/kernel.h runtime/plugin.h runtime/plugin_abi.h
    serve/triton.h)

if(T2O_WITH_TORCH)
  add_library(torch2onnx_converter SHARED ${CMAKE_CURRENT_LIST_DIR}/version.cpp)
  t2o_link_whole(torch2onnx_converter t2o_torch t2o_verify)
  target_link_libraries(torch2onnx_converter PUBLIC torch2onnx_runtime PRIVATE ${TORCH_LIBRARIES})
  target_compile_definitions(torch2onnx_converter PRIVATE T2O_VERSION="${PROJECT_VERSION}"
                             T2O_VERSION_FN=torch2onnx_converter_version)
  set_target_properties(torch2onnx_converter PROPERTIES EXPORT_NAME converter VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR} INSTALL_RPATH "$ORIGIN")
  list(APPEND T2O_INSTALL_TARGETS torch2onnx_converter)
  list(APPEND T2O_INSTALL_HEADERS torch/convert.h verify/verify.h verify/compare.h)
endif()

install(TARGETS ${T2O_INSTALL_TARGETS} EXPORT torch2onnxTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel)
foreach(h ${T2O_INSTALL_HEADERS})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${T2O_SRC}/${h} DESTINATION ${T2O_INSTALL_INCLUDE}/${dir} COMPONENT devel)
endforeach()
install(EXPORT torch2onnxTargets NAMESPACE torch2onnx:: DESTINATION ${T2O_INSTALL_CMAKE} COMPONENT devel)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/torch2onnxConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/cmake/torch2onnxConfig.cmake INSTALL_DESTINATION ${T2O_INSTALL_CMAKE})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/torch2onnxConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/torch2onnxConfig.cmake ${CMAKE_BINARY_DIR}/cmake/torch2onnxConfigVersion.cmake
        DESTINATION ${T2O_INSTALL_CMAKE} COMPONENT devel)

configure_file(${CMAKE_CURRENT_LIST_DIR}/torch2onnx.pc.in ${CMAKE_BINARY_DIR}/cmake/torch2onnx.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cmake/torch2onnx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT devel)
if(T2O_WITH_TORCH)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/torch2onnx-converter.pc.in ${CMAKE_BINARY_DIR}/cmake/torch2onnx-converter.pc
                 @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/cmake/torch2onnx-converter.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT devel)
endif()
install(TARGETS torch2onnx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
