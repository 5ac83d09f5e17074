# CMake toolchain file for riscv64-unknown-elf-gcc (bare-metal RV32, picolibc), shipped by eerie-c.
#   cmake -S PROJECT -B PROJECT/build -DCMAKE_TOOLCHAIN_FILE=PROJECT/runtime/riscv64-unknown-elf.cmake
# The -march/-mabi flags come from the model's target (its NAME.cmake), not from here.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR riscv)
set(TOOLCHAIN_PREFIX riscv64-unknown-elf- CACHE STRING "cross-compiler prefix")
set(CMAKE_C_COMPILER ${TOOLCHAIN_PREFIX}gcc)
set(CMAKE_ASM_COMPILER ${TOOLCHAIN_PREFIX}gcc)
set(CMAKE_AR ${TOOLCHAIN_PREFIX}ar)
set(CMAKE_OBJCOPY ${TOOLCHAIN_PREFIX}objcopy)
set(CMAKE_SIZE ${TOOLCHAIN_PREFIX}size)
# No host system to link test programs against: check the compiler with a static library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
