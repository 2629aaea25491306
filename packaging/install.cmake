# packaging/install.cmake: what `cmake --install` (and `make install`, and the Debian
# packages built by `make deb`) puts where. Included from the top-level CMakeLists.txt.
#
# Layout (GNUInstallDirs; PREFIX = CMAKE_INSTALL_PREFIX, DESTDIR honoured):
#   LIBDIR/libergon.so.0.1.0, .so.0 (SONAME), .so      the library (only erg_ symbols exported)
#   INCLUDEDIR/ergon/*.h                                public headers
#   LIBDIR/pkgconfig/ergon.pc                           pkg-config
#   LIBDIR/cmake/ergon/ergon{Config,ConfigVersion,Targets}.cmake   find_package(ergon) -> ergon::ergon
#   BINDIR/ergon, SBINDIR/ergond                        the CLI and the clock daemon
#   LIBDIR/ergon/ergon-watchdog                         the client's watchdog (libergon runs it;
#                                                       per architecture, as the library is)
#   MANDIR/man1/ergon.1, ergon-COMMAND.1, man8/ergond.8 generated from the --help texts
#   DATADIR/bash-completion/completions/{ergon,ergond}
#   DOCDIR (share/doc/ergon)/*.md                       the documentation
#   ERGON_PYTHON_DIR/ergon/                             the Python binding (+ _install.py: LIBDIR)
#   ERGON_SYSTEMD_UNITDIR/ergond.service                the systemd unit
#   SYSCONFDIR/ergond.conf                              default allow list (kept if present)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ERGON_PKG_DIR ${CMAKE_CURRENT_LIST_DIR})

# --- Where the Python package goes: the site-packages directory of ERGON_PYTHON that lies
# under the prefix (Debian: /usr -> lib/python3/dist-packages, /usr/local ->
# lib/python3.X/dist-packages), else the interpreter's posix_prefix purelib for the prefix.
find_program(ERGON_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(ERGON_PYTHON NAMES python3)
set(ERGON_PYTHON_DIR "" CACHE STRING "Where the Python package ergon/ is installed (relative to the prefix or absolute; empty: ask ERGON_PYTHON)")
set(_ergon_pydir "${ERGON_PYTHON_DIR}")
if(NOT _ergon_pydir AND ERGON_PYTHON)
  execute_process(
    COMMAND ${ERGON_PYTHON} ${ERGON_PKG_DIR}/python_dir.py ${CMAKE_INSTALL_PREFIX}
    OUTPUT_VARIABLE _ergon_pydir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(_rc)
    set(_ergon_pydir "")
  endif()
endif()
if(NOT _ergon_pydir)
  set(_ergon_pydir "${CMAKE_INSTALL_LIBDIR}/python3/site-packages")
endif()

# --- systemd unit directory: systemd's own answer for /usr, else under the prefix.
set(ERGON_SYSTEMD_UNITDIR "" CACHE STRING "Where ergond.service is installed (empty: systemd's unit dir for prefix /usr, PREFIX/lib/systemd/system otherwise)")
set(_ergon_unitdir "${ERGON_SYSTEMD_UNITDIR}")
if(NOT _ergon_unitdir)
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    execute_process(COMMAND pkg-config --variable=systemdsystemunitdir systemd
                    OUTPUT_VARIABLE _ergon_unitdir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(NOT _ergon_unitdir)
    set(_ergon_unitdir "lib/systemd/system")
  endif()
endif()

# --- Executables (and the Python package) find the library under a non-system prefix
# without ldconfig; no RPATH where the library directory is a system one (Debian packages).
#
# No RUNPATH entry is ever empty or relative: the loader resolves those against the current
# directory of whoever runs the program (a libm.so.6 planted in the cwd was loaded by
# `ergon version`). CMake's own scheme cannot promise that: it links a build-tree RUNPATH and
# edits it in place at install, and pads the build value with ':' (empty entries) to make room.
# So the programs are linked with the RUNPATH chosen here (BUILD_WITH_INSTALL_RPATH): in the
# build tree the directory libergon is built in, repeated until it is at least as long as the
# installed value (a duplicate absolute entry is harmless), and the install rewrites that in
# place to the installed value ($ORIGIN-relative), or removes it in a system directory.
# tests/lint/runpath_no_cwd.sh checks every ELF file of both trees.
list(FIND CMAKE_C_IMPLICIT_LINK_DIRECTORIES "${CMAKE_INSTALL_FULL_LIBDIR}" _ergon_sysdir)
set(ERGON_PY_LIBDIR "")
if(_ergon_sysdir EQUAL -1)
  set(ERGON_PY_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
endif()
# ergon_runpath(TARGET DESTINATION TO_LIBDIR): TARGET, installed into DESTINATION, finds
# libergon at $ORIGIN/TO_LIBDIR once installed (outside a system directory).
function(ergon_runpath target dest to_libdir)
  set(installed "")
  if(_ergon_sysdir EQUAL -1)
    set(installed "$ORIGIN/${to_libdir}")
  endif()
  get_target_property(_libout ergon LIBRARY_OUTPUT_DIRECTORY)
  if(NOT _libout)
    set(_libout "${CMAKE_BINARY_DIR}")
  endif()
  set(build "${_libout}")
  string(LENGTH "${installed}" _want)
  string(LENGTH "${build}" _have)
  while(_have LESS _want)
    string(APPEND build ":${_libout}")
    string(LENGTH "${build}" _have)
  endwhile()
  string(REPLACE ":" ";" _build_list "${build}")
  set_target_properties(${target} PROPERTIES BUILD_WITH_INSTALL_RPATH ON
                                             INSTALL_RPATH "${_build_list}")
  install(TARGETS ${target} RUNTIME DESTINATION ${dest})
  if(IS_ABSOLUTE "${dest}")
    set(_file "\$ENV{DESTDIR}${dest}/$<TARGET_FILE_NAME:${target}>")
  else()
    set(_file "\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${dest}/$<TARGET_FILE_NAME:${target}>")
  endif()
  if(installed)
    install(CODE "file(RPATH_CHANGE FILE \"${_file}\" OLD_RPATH \"${build}\"
                       NEW_RPATH \"${installed}\")")
  else()
    install(CODE "file(RPATH_REMOVE FILE \"${_file}\")")
  endif()
endfunction()

# --- Library, headers, CMake package, pkg-config.
set_target_properties(ergon PROPERTIES EXPORT_NAME ergon)
target_include_directories(ergon INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS ergon EXPORT ergonTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ergon DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
set(ERGON_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ergon)
install(EXPORT ergonTargets NAMESPACE ergon:: DESTINATION ${ERGON_CMAKE_DIR})
configure_package_config_file(${ERGON_PKG_DIR}/ergonConfig.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/ergonConfig.cmake INSTALL_DESTINATION ${ERGON_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/ergonConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/packaging/ergonConfig.cmake
              ${CMAKE_BINARY_DIR}/packaging/ergonConfigVersion.cmake
        DESTINATION ${ERGON_CMAKE_DIR})
# pkg-config paths relative to ${prefix} where they lie under it (relocatable), else absolute.
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(ERGON_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(ERGON_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
configure_file(${ERGON_PKG_DIR}/ergon.pc.in ${CMAKE_BINARY_DIR}/packaging/ergon.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/ergon.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- Programs (ergon_runpath above installs them with their RUNPATH).
file(RELATIVE_PATH _rel ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
ergon_runpath(ergon_cli ${CMAKE_INSTALL_BINDIR} "${_rel}")
if(TARGET ergond)
  file(RELATIVE_PATH _rel ${CMAKE_INSTALL_FULL_SBINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  ergon_runpath(ergond ${CMAKE_INSTALL_SBINDIR} "${_rel}")
endif()
ergon_runpath(ergon_watchdog ${CMAKE_INSTALL_LIBDIR}/ergon "..")

# --- Man pages, generated at build time from the --help texts (packaging/gen_man.py).
# Off in sanitizer/fuzz builds: it runs the freshly built programs.
if(ERGON_SANITIZE OR ERGON_FUZZ OR CMAKE_CROSSCOMPILING)
  set(_ergon_man_default OFF)
else()
  set(_ergon_man_default ON)
endif()
option(ERGON_MANPAGES "Generate and install the man pages" ${_ergon_man_default})
if(ERGON_MANPAGES AND TARGET ergond AND ERGON_PYTHON)
  set(_man_stamp ${CMAKE_BINARY_DIR}/man/stamp)
  add_custom_command(OUTPUT ${_man_stamp}
    COMMAND ${ERGON_PYTHON} ${ERGON_PKG_DIR}/gen_man.py --ergon $<TARGET_FILE:ergon_cli>
            --ergond $<TARGET_FILE:ergond> --version ${PROJECT_VERSION} --out ${CMAKE_BINARY_DIR}/man
    COMMAND ${CMAKE_COMMAND} -E touch ${_man_stamp}
    DEPENDS ergon_cli ergond ${ERGON_PKG_DIR}/gen_man.py
    COMMENT "Generating man pages from the --help texts" VERBATIM)
  add_custom_target(ergon_man ALL DEPENDS ${_man_stamp})
  install(DIRECTORY ${CMAKE_BINARY_DIR}/man/man1 ${CMAKE_BINARY_DIR}/man/man8
          DESTINATION ${CMAKE_INSTALL_MANDIR})
endif()

# --- The Markdown documentation (man pages point at it).
file(GLOB _ergon_docs ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${_ergon_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(IS_DIRECTORY ${CMAKE_SOURCE_DIR}/docs/img)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/img DESTINATION ${CMAKE_INSTALL_DOCDIR})
endif()

# --- Bash completion.
install(FILES ${ERGON_PKG_DIR}/bash-completion/ergon ${ERGON_PKG_DIR}/bash-completion/ergond
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# --- Python package: python/ergon/*.py (and integration/*.py) plus _install.py, which tells it where the library is
# (empty in a system library directory, which the loader searches anyway: the Debian package
# python3-ergon is then architecture-independent).
file(GLOB _ergon_py CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/ergon/*.py)
configure_file(${ERGON_PKG_DIR}/_install.py.in ${CMAKE_BINARY_DIR}/packaging/_install.py @ONLY)
install(FILES ${_ergon_py} ${CMAKE_BINARY_DIR}/packaging/_install.py DESTINATION ${_ergon_pydir}/ergon)
# ergon.integration is a subpackage (one module per framework: deepspeed, megatron, ...).
file(GLOB _ergon_py_integration CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/ergon/integration/*.py)
install(FILES ${_ergon_py_integration} DESTINATION ${_ergon_pydir}/ergon/integration)

# --- ergond as a service: unit and default allow list (an existing one is never replaced).
set(ERGON_FULL_SBINDIR ${CMAKE_INSTALL_FULL_SBINDIR})
set(ERGON_FULL_SYSCONFDIR ${CMAKE_INSTALL_FULL_SYSCONFDIR})
configure_file(${ERGON_PKG_DIR}/ergond.service.in ${CMAKE_BINARY_DIR}/packaging/ergond.service @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/ergond.service DESTINATION ${_ergon_unitdir})
install(CODE "
  set(_conf \"\$ENV{DESTDIR}${CMAKE_INSTALL_FULL_SYSCONFDIR}/ergond.conf\")
  if(EXISTS \"\${_conf}\")
    message(STATUS \"Keeping: \${_conf}\")
  else()
    file(INSTALL DESTINATION \"${CMAKE_INSTALL_FULL_SYSCONFDIR}\" TYPE FILE
         FILES \"${ERGON_PKG_DIR}/ergond.conf\")
  endif()")

message(STATUS "ergon install: prefix ${CMAKE_INSTALL_PREFIX}, libdir ${CMAKE_INSTALL_LIBDIR}, "
               "python ${_ergon_pydir}, units ${_ergon_unitdir}, config ${CMAKE_INSTALL_FULL_SYSCONFDIR}")
