// The C ABI of an emulated library (one entry's shared library, built by kda-emu's toolchain),
// which kda-emu's raw layer and the sanitizer driver load. Its version and constants are Rust's
// (kda-emu/src/abi.rs), in the generated kda_emu_config.h; src/abi.rs checks these declarations.
#pragma once

#include <stddef.h>

#include "kda_emu_config.h"
#define KDA_EMU_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

// What a launch that failed reports: its kind (KDA_EMU_FAULT_*), where it happened as far as it
// has a place, and its message. Filled by kda_emu_launch; the layout is src/abi.rs's `Fault`.
struct kda_emu_fault {
    unsigned kind;
    // 1 when block and thread name the thread that failed.
    unsigned has_thread;
    unsigned block[3];
    unsigned thread[3];
    // For an access outside its memory: the kernel parameter it went through (or -1), the
    // __shared__ array or "dynamic shared memory" (or ""), and the element index (a byte's in
    // dynamic shared memory; negative before the first).
    int parameter;
    char variable[KDA_EMU_VARIABLE_CAPACITY];
    long long index;
    // NUL-terminated, the kernel named first.
    char message[KDA_EMU_MESSAGE_CAPACITY];
};

// KDA_EMU_ABI_VERSION of the runtime compiled into the module.
KDA_EMU_API unsigned kda_emu_abi_version(void);
// The index of the entry with this extern "C" name, or -1.
KDA_EMU_API int kda_emu_find(const char* name);
// The entry's parameter types in order, comma-separated ("const bf16*,bf16*,u32"), or NULL.
KDA_EMU_API const char* kda_emu_params(int entry);
// The static __shared__ bytes of the library's kernel (under AddressSanitizer, every kernel's of
// its module, with the redzones between them: see kda_emu_runtime.cpp).
KDA_EMU_API unsigned long long kda_emu_static_shared_bytes(void);
// sizeof(struct kda_emu_fault) in the runtime, which a loader compares with its own.
KDA_EMU_API unsigned long long kda_emu_fault_size(void);
// Runs every block of the grid: 0, or 1 with `fault` filled. `args[i]` points to the value of
// parameter i (a device pointer for a buffer); `sizes[i]` is the bytes of a buffer's view the
// kernel may reach (ignored for a scalar): without a sanitizer the runtime stages each view at that
// size, a guard page after it, and copies the written ones back.
KDA_EMU_API int kda_emu_launch(int entry, void* const* args, const unsigned long long* sizes, unsigned arg_count,
                               const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared,
                               unsigned long long seed, struct kda_emu_fault* fault);

#ifdef __cplusplus
}
#endif
