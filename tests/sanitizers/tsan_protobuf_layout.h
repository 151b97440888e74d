// ThreadSanitizer builds only (TENSORD_SANITIZE=thread; CMakeLists.txt includes this header at
// the top of every C++ file with -include).
//
// Debian's libprotobuf is not built with -fsanitize=thread, but google/protobuf/map_field.h
// gives MapFieldBase two more members when __SANITIZE_THREAD__ is defined. Instrumented code
// and the library would then disagree on the layout of every map field, and the library's
// MapFieldBase::Destruct would free arena memory as if it were its own (a map attribute of an
// Execute request, parsed on its arena, crashed the server). The header is read here once, as
// the library was built; everything it includes is read before, with the sanitizer's macros on.
#ifndef TENSORD_TESTS_SANITIZERS_TSAN_PROTOBUF_LAYOUT_H_
#define TENSORD_TESTS_SANITIZERS_TSAN_PROTOBUF_LAYOUT_H_

#include <google/protobuf/arena.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/generated_message_reflection.h>
#include <google/protobuf/generated_message_util.h>
#include <google/protobuf/map_entry.h>
#include <google/protobuf/map_field_lite.h>
#include <google/protobuf/map_type_handler.h>
#include <google/protobuf/message.h>
#include <google/protobuf/port.h>
#include <google/protobuf/repeated_field.h>
#include <google/protobuf/stubs/mutex.h>
#include <google/protobuf/unknown_field_set.h>

#include <atomic>
#include <functional>

#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")

#endif  // TENSORD_TESTS_SANITIZERS_TSAN_PROTOBUF_LAYOUT_H_
