// The sanitizer driver: runs one launch of an emulated kernel in a process of its own, so the
// kernel and the emulator can be compiled with a sanitizer (AddressSanitizer + UBSan, or
// ThreadSanitizer), which needs its runtime in the executable. kda-runtime's `DriverBackend`
// writes the request, runs `kda_emu_driver REQUEST RESPONSE`, and reads the response, in the
// format kda-emu/src/wire.rs defines (its constants come from the generated kda_emu_config.h).
//
// Every buffer is allocated at exactly the bytes the request gives (a view's elements up to its
// extent), starting at the view's misalignment modulo 16 so a kernel's vector path is taken as it
// would be for the view; the bytes before it are poisoned under AddressSanitizer. A read or write
// past the extent is a sanitizer report; without a sanitizer the runtime stages each buffer again,
// a guard page after it, and reports the access as the launch's fault (kda_emu_runtime.cpp).
//
// Request, little-endian (str = u32 length + bytes):
//   magic, str library, str entry, str parameter types ("const bf16*,u32"),
//   u32 grid[3], u32 block[3], u32 dynamic shared bytes, u64 seed, u32 argument count, then per
//   argument a u8 kind (0 scalar: u64 bits; 1 read-only buffer, 2 written buffer: u64
//   misalignment (< 16), u64 length, the bytes).
// Response: magic, u8 status; launched (0): u32 count, then each written buffer as u64 length +
//   bytes, in argument order; refused or failed (1): the fault (kda_abi.h) as u32 kind, u32
//   has_thread, u32 block[3], u32 thread[3], i32 parameter, str variable, i64 index, str message.
// The exit status is 0 unless the driver itself fails (2) or a sanitizer reports (its own).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kda_abi.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KDA_POISON(address, size) ASAN_POISON_MEMORY_REGION(address, size)
#else
#define KDA_POISON(address, size) ((void)(address), (void)(size))
#endif

namespace {

const char kMagic[] = KDA_EMU_WIRE_MAGIC;
// The magic's bytes, without the string's NUL.
constexpr size_t kMagicBytes = sizeof kMagic - 1;

[[noreturn]] void die(const std::string& message) {
    std::fprintf(stderr, "kda_emu_driver: %s\n", message.c_str());
    std::exit(2);
}

class Reader {
   public:
    explicit Reader(const char* path) : file_(std::fopen(path, "rb")) {
        if (!file_) die(std::string("cannot open the request ") + path);
    }
    ~Reader() { std::fclose(file_); }
    void bytes(void* out, size_t n) {
        if (n && std::fread(out, 1, n, file_) != n) die("the request is truncated");
    }
    template <class T>
    T value() {
        T v;
        bytes(&v, sizeof v);
        return v;
    }
    std::string str() {
        std::string s(value<uint32_t>(), '\0');
        bytes(s.data(), s.size());
        return s;
    }

   private:
    std::FILE* file_;
};

class Writer {
   public:
    explicit Writer(const char* path) : file_(std::fopen(path, "wb")) {
        if (!file_) die(std::string("cannot create the response ") + path);
    }
    ~Writer() {
        if (std::fclose(file_) != 0) die("cannot write the response");
    }
    void bytes(const void* data, size_t n) {
        if (n && std::fwrite(data, 1, n, file_) != n) die("cannot write the response");
    }
    template <class T>
    void value(T v) {
        bytes(&v, sizeof v);
    }
    void str(const std::string& s) {
        value(static_cast<uint32_t>(s.size()));
        bytes(s.data(), s.size());
    }

   private:
    std::FILE* file_;
};

struct Argument {
    uint8_t kind = 0;
    uint64_t scalar = 0;
    uint64_t offset = 0, length = 0;
    std::unique_ptr<unsigned char, decltype(&std::free)> allocation{nullptr, &std::free};
    void* pointer = nullptr;  // what the kernel receives: `allocation + offset`
};

// The response of a launch that ran.
void respond_launched(const char* path, const std::vector<Argument>& args) {
    Writer out(path);
    out.bytes(kMagic, kMagicBytes);
    out.value(uint8_t{0});
    uint32_t written = 0;
    for (const Argument& arg : args) written += arg.kind == KDA_EMU_ARG_WRITE;
    out.value(written);
    for (const Argument& arg : args) {
        if (arg.kind != KDA_EMU_ARG_WRITE) continue;
        out.value(arg.length);
        out.bytes(arg.allocation.get() + arg.offset, arg.length);
    }
}

// The response of a launch that was refused or failed.
void respond_failed(const char* path, const kda_emu_fault& fault) {
    Writer out(path);
    out.bytes(kMagic, kMagicBytes);
    out.value(uint8_t{1});
    out.value(uint32_t{fault.kind});
    out.value(uint32_t{fault.has_thread});
    for (unsigned b : fault.block) out.value(uint32_t{b});
    for (unsigned t : fault.thread) out.value(uint32_t{t});
    out.value(int32_t{fault.parameter});
    out.str(std::string(fault.variable, strnlen(fault.variable, sizeof fault.variable)));
    out.value(int64_t{fault.index});
    out.str(std::string(fault.message, strnlen(fault.message, sizeof fault.message)));
}

// A launch refused before the kernel ran.
kda_emu_fault refused(const std::string& message) {
    kda_emu_fault fault{};
    fault.kind = KDA_EMU_FAULT_REFUSED;
    fault.parameter = -1;
    std::snprintf(fault.message, sizeof fault.message, "%s", message.c_str());
    return fault;
}

template <class F>
F symbol(void* library, const char* name) {
    void* found = dlsym(library, name);
    if (!found) die(std::string("the library lacks ") + name);
    return reinterpret_cast<F>(found);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) die("usage: kda_emu_driver REQUEST RESPONSE");
    Reader in(argv[1]);
    char magic[kMagicBytes];
    in.bytes(magic, sizeof magic);
    if (std::memcmp(magic, kMagic, kMagicBytes) != 0) die("not a kda emulator request");
    const std::string library_path = in.str(), entry = in.str(), params = in.str();
    unsigned grid[3], block[3];
    for (unsigned& g : grid) g = in.value<uint32_t>();
    for (unsigned& b : block) b = in.value<uint32_t>();
    const unsigned dynamic_shared = in.value<uint32_t>();
    const uint64_t seed = in.value<uint64_t>();
    std::vector<Argument> args(in.value<uint32_t>());
    for (Argument& arg : args) {
        arg.kind = in.value<uint8_t>();
        if (arg.kind == KDA_EMU_ARG_SCALAR) {
            arg.scalar = in.value<uint64_t>();
            arg.pointer = &arg.scalar;
            continue;
        }
        if (arg.kind != KDA_EMU_ARG_READ && arg.kind != KDA_EMU_ARG_WRITE) die("unknown argument kind");
        arg.offset = in.value<uint64_t>();
        arg.length = in.value<uint64_t>();
        if (arg.offset >= 16) die("a misalignment of 16 bytes or more");
        // Aligned to 16 and exactly this long: the data starts `offset` bytes in and ends it.
        void* allocation = nullptr;
        if (posix_memalign(&allocation, 16, arg.offset + arg.length + (arg.length == 0)) != 0) die("out of memory");
        arg.allocation.reset(static_cast<unsigned char*>(allocation));
        in.bytes(arg.allocation.get() + arg.offset, arg.length);
        KDA_POISON(arg.allocation.get(), arg.offset);
        arg.scalar = reinterpret_cast<uintptr_t>(arg.allocation.get() + arg.offset);
        arg.pointer = &arg.scalar;
    }

    void* library = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) die(std::string("cannot open ") + library_path + ": " + dlerror());
    auto version = symbol<unsigned (*)()>(library, "kda_emu_abi_version");
    if (version() != KDA_EMU_ABI_VERSION) die("the library was built for another emulator ABI");
    auto fault_size = symbol<decltype(&kda_emu_fault_size)>(library, "kda_emu_fault_size");
    if (fault_size() != sizeof(kda_emu_fault)) die("the library's fault record differs from the driver's");
    auto find = symbol<int (*)(const char*)>(library, "kda_emu_find");
    auto kernel_params = symbol<const char* (*)(int)>(library, "kda_emu_params");
    auto launch = symbol<decltype(&kda_emu_launch)>(library, "kda_emu_launch");

    const int index = find(entry.c_str());
    if (index < 0) {
        respond_failed(argv[2], refused("the library has no entry `" + entry + "`"));
        return 0;
    }
    const char* found = kernel_params(index);
    if (!found || params != found) {
        respond_failed(argv[2], refused("the kernel takes `" + std::string(found ? found : "?") + "`, the launch passes `" +
                                        params + "`"));
        return 0;
    }
    std::vector<void*> pointers;
    std::vector<unsigned long long> sizes;
    for (Argument& arg : args) {
        pointers.push_back(arg.pointer);
        sizes.push_back(arg.length);
    }
    kda_emu_fault fault{};
    const int status = launch(index, pointers.data(), sizes.data(), static_cast<unsigned>(pointers.size()), grid,
                              block, dynamic_shared, seed, &fault);
    if (status == 0) {
        respond_launched(argv[2], args);
    } else {
        respond_failed(argv[2], fault);
    }
    return 0;
}
