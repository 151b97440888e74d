# What `cmake --install <build> [--prefix P] [--component C]` puts under the prefix:
#   component client: the C++ client's headers (one include root, include/tensord), its static
#     libraries (tensord_client and the generated protobuf/gRPC code it links, tensord_proto),
#     a CMake package (find_package(tensord), target tensord::client) and tensord.pc;
#   component server: the tensord server and the tensordctl CLI.
# Everything installed names paths relative to the prefix, so the tree may be moved or packed.
include(CMakePackageConfigHelpers)

set(TENSORD_INCLUDE_ROOT ${CMAKE_INSTALL_INCLUDEDIR}/tensord)
set(TENSORD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tensord)
# The generated package files, before installation.
set(TENSORD_PACKAGE_DIR ${PROJECT_BINARY_DIR}/package)

if(TARGET tensord_client)
  set_target_properties(tensord_client PROPERTIES EXPORT_NAME client)
  set_target_properties(tensord_proto PROPERTIES EXPORT_NAME proto)
  set_target_properties(tensord_common PROPERTIES EXPORT_NAME common)
  install(TARGETS tensord_client tensord_proto tensord_common
          EXPORT tensordTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client)

  # The public headers keep their in-tree paths ("client/cpp/tensord.h"), so code builds the
  # same against the checkout and the installed tree. internal.h is the library's own.
  file(GLOB client_headers ${CMAKE_CURRENT_SOURCE_DIR}/client/cpp/*.h)
  list(FILTER client_headers EXCLUDE REGEX "/internal\\.h$")
  install(FILES ${client_headers} DESTINATION ${TENSORD_INCLUDE_ROOT}/client/cpp COMPONENT client)
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/common/dtype_table.h
          DESTINATION ${TENSORD_INCLUDE_ROOT}/common COMPONENT client)
  # The generated message headers the public headers include: every tensord.v1 message and
  # google.rpc's error details (status.h decodes them). The gRPC stubs (*.grpc.pb.h), the
  # health service and google/rpc/status stay internal to the library.
  foreach(proto ${TENSORD_PROTOS})
    file(RELATIVE_PATH rel ${PROTO_ROOT} ${proto})
    if(rel MATCHES "^tensord/v1/" OR rel STREQUAL "google/rpc/error_details.proto")
      string(REGEX REPLACE "\\.proto$" ".pb.h" header ${rel})
      get_filename_component(dir ${rel} DIRECTORY)
      install(FILES ${PROTO_GEN}/${header} DESTINATION ${TENSORD_INCLUDE_ROOT}/${dir}
              COMPONENT client)
    endif()
  endforeach()

  install(EXPORT tensordTargets NAMESPACE tensord:: DESTINATION ${TENSORD_CMAKE_DIR}
          COMPONENT client)
  configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tensordConfig.cmake.in
                                ${TENSORD_PACKAGE_DIR}/tensordConfig.cmake
                                INSTALL_DESTINATION ${TENSORD_CMAKE_DIR})
  # 0.x: a minor version may change the API, so only the same minor version is compatible.
  write_basic_package_version_file(${TENSORD_PACKAGE_DIR}/tensordConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${TENSORD_PACKAGE_DIR}/tensordConfig.cmake
                ${TENSORD_PACKAGE_DIR}/tensordConfigVersion.cmake
          DESTINATION ${TENSORD_CMAKE_DIR} COMPONENT client)

  # tensord.pc finds the prefix from its own location (${pcfiledir}), which is
  # <prefix>/<libdir>/pkgconfig whatever the prefix given at install time. Only an absolute
  # CMAKE_INSTALL_LIBDIR/INCLUDEDIR (a fixed location the builder asked for) is written as is.
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(TENSORD_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
    set(TENSORD_PC_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  else()
    file(RELATIVE_PATH pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
    string(REGEX REPLACE "/$" "" pc_to_prefix "${pc_to_prefix}")
    set(TENSORD_PC_PREFIX "\${pcfiledir}/${pc_to_prefix}")
    set(TENSORD_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  endif()
  if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(TENSORD_PC_INCLUDEDIR ${TENSORD_INCLUDE_ROOT})
  else()
    set(TENSORD_PC_INCLUDEDIR "\${prefix}/${TENSORD_INCLUDE_ROOT}")
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/tensord.pc.in ${TENSORD_PACKAGE_DIR}/tensord.pc
                 @ONLY)
  install(FILES ${TENSORD_PACKAGE_DIR}/tensord.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT client)
endif()

foreach(binary tensord tensordctl)
  if(TARGET ${binary})
    install(TARGETS ${binary} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
  endif()
endforeach()
