// Which sanitizer this file is compiled with, whichever compiler: g++ says so with __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__, clang (the fuzz build's, whose libraries the asan suite links) only through __has_feature,
// so a check of g++'s macros alone is silently off there.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SRUNWAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SRUNWAY_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define SRUNWAY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SRUNWAY_TSAN 1
#endif
#endif
