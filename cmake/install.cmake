# What `cmake --install` puts where, by component:
#   library  libesgraph.so, every public header (the hand-written and the generated ones, one
#            include root), the CMake package (esgraph::esgraph) and esgraph.pc
#   python   the esgraph package (its modules, stubs and extension) in ESG_INSTALL_PYTHONDIR
#   wheel    libesgraph.so inside the package, for a wheel that carries its library (setup.py)
# and `cpack -G DEB` (make package) makes a .deb of the library and python components.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS esgraph EXPORT esgraphTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The MPI plugin lies beside the library, where dist/world.cpp looks for it.
if(TARGET esgraph_mpi)
  install(TARGETS esgraph_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ ${ESG_GEN_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT library)
install(EXPORT esgraphTargets NAMESPACE esgraph:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/esgraph COMPONENT library)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/esgraphConfig.cmake.in ${CMAKE_BINARY_DIR}/esgraphConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/esgraph)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/esgraphConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/esgraphConfig.cmake ${CMAKE_BINARY_DIR}/esgraphConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/esgraph COMPONENT library)
# The prefix is the one configured; `cmake --install --prefix P` rewrites it in the installed copy.
configure_file(${PROJECT_SOURCE_DIR}/cmake/esgraph.pc.in ${CMAKE_BINARY_DIR}/esgraph.pc.in-configured @ONLY)
install(CODE "
  file(READ \"${CMAKE_BINARY_DIR}/esgraph.pc.in-configured\" pc)
  string(REPLACE \"prefix=${CMAKE_INSTALL_PREFIX}\" \"prefix=\${CMAKE_INSTALL_PREFIX}\" pc \"\${pc}\")
  file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/esgraph.pc\" \"\${pc}\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/esgraph.pc\")"
  COMPONENT library)

set(CPACK_PACKAGE_NAME esgraph)
set(CPACK_PACKAGE_VENDOR "esgraph")
set(CPACK_PACKAGE_CONTACT "esgraph developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Eager-style neural-network graph builder and compiler: C ABI, C++ and Python APIs")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL library python)  # one package of both (not the wheel's bundled copy)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # libdnnl, libstdc++, … as dpkg-shlibdeps finds them
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3-numpy")
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
include(CPack)
