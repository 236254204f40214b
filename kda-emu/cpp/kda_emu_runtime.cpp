// The host side of kda's CUDA emulator, compiled into every emulated module: the entry registry,
// the block scheduler, barriers, warp exchanges and gathers, cp.async, the tensor-core ldmatrix
// and mmas (bf16 and tf32), and the C ABI the Rust backend and the sanitizer driver call (kda_emu_abi.h).
//
// A launch runs its blocks one at a time in an order shuffled by its seed, each block on one OS
// thread per CUDA thread. Every wait (barrier, exchange, gather) goes through one monitor per block
// that knows which threads run, wait or have returned, so a barrier some thread never reaches, a
// warp collective (shuffle, vote, ldmatrix, mma) with lanes missing or a deadlock ends the launch with a
// message instead of a hang: the monitor sets the failure and every waiting thread unwinds out of
// the kernel (Abort).
//
// Under ThreadSanitizer the monitor's own mutex would order every thread that waits after every
// thread that waited before it, whatever they waited for, and hide a missing barrier behind any
// other wait. So the monitor's locking and its own state are invisible to TSan, and it declares the
// order CUDA gives instead: a __syncthreads orders the block's threads, a __syncwarp its mask's
// lanes, and nothing else does (shuffles, votes, ldmatrix and mma exchange values, not memory order).
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kda_abi.h"
#include "kda_emu.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

// The library's kernel's __shared__ variables, between the linker's bounds of their section (weak: a
// kernel without shared memory has no section).
extern "C" {
extern char __start_kda_emu_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_kda_emu_shared[] __attribute__((weak, visibility("hidden")));
// The registration of the library's one entry: the build links each entry's library with that
// entry's KDA_EMU_ENTRY_AS function under this name (kda-emu/src/toolchain.rs), which is what
// keeps that kernel, and only it, in the library. Weak: a library linked without one has no entry.
void kda_emu_entry_registration(void) __attribute__((weak, visibility("hidden")));
}

namespace {
// Registers the library's entry when it is loaded.
__attribute__((constructor)) void register_the_libraries_entry() {
    if (kda_emu_entry_registration) kda_emu_entry_registration();
}
}  // namespace

#if defined(__SANITIZE_THREAD__)
#define KDA_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KDA_EMU_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define KDA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KDA_EMU_ASAN 1
#endif
#endif

#ifdef KDA_EMU_ASAN
#include <sanitizer/asan_interface.h>
#endif

// Without a sanitizer the runtime checks a kernel's accesses itself: every view of a launch and
// its dynamic shared memory are staged between guards (LaunchMemory); the module's unit is compiled
// with a call before each load and store (check_access) and with UBSan's array bounds check, whose
// handlers are defined here; and what escapes the calls faults in a guard, which the fault
// handler turns into the launch's failure. The same handler makes the kernel's other faults (an
// integer division by zero, a wild or null pointer, a trap) the launch's failure, where they would
// end the process. Under a sanitizer its runtime checks them (byte for byte under
// AddressSanitizer, UBSan a division by zero), so the runtime stays out of its way.
#if !defined(KDA_EMU_ASAN) && !defined(KDA_EMU_TSAN)
#define KDA_EMU_CHECKED 1
#endif

#ifdef KDA_EMU_TSAN
// ThreadSanitizer's dynamic annotations (its runtime defines them).
extern "C" {
void AnnotateHappensBefore(const char* file, int line, const volatile void* address);
void AnnotateHappensAfter(const char* file, int line, const volatile void* address);
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
#endif

namespace kda_emu {
namespace {

// The monitor's waits as TSan sees them (nothing, outside a TSan build): while a MonitorScope
// lives, the calling thread's synchronization and memory accesses are ignored; `release` and
// `acquire` of one SyncPoint order the threads that pass it, as a CUDA barrier does.
struct SyncPoint {
    char byte = 0;  // an address of its own
};
#ifdef KDA_EMU_TSAN
struct MonitorScope {
    MonitorScope() {
        AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    }
    ~MonitorScope() {
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
        AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    }
    MonitorScope(const MonitorScope&) = delete;
    MonitorScope& operator=(const MonitorScope&) = delete;
};
// Called inside a MonitorScope, whose ignored synchronization would drop the annotation.
void release(const SyncPoint& point) {
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    AnnotateHappensBefore(__FILE__, __LINE__, &point.byte);
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
}
void acquire(const SyncPoint& point) {
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    AnnotateHappensAfter(__FILE__, __LINE__, &point.byte);
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
}
#else
struct MonitorScope {
    MonitorScope() {}  // user-provided: a scope is not an unused variable
};
void release(const SyncPoint&) {}
void acquire(const SyncPoint&) {}
#endif

// Each barrier or __syncwarp generation releases and acquires its own point of a ring, so that a
// thread woken late from generation g acquires g's releases and not those of threads already
// waiting in a later one. A full barrier or full-mask __syncwarp cannot complete again before all
// its threads have woken, so a ring of 8 outlasts any lag.
constexpr unsigned kSyncRing = 8;

constexpr unsigned kMaxEntries = 256;
// The device's limits (kda-emu/src/device.rs, through kda_emu_config.h). Shared memory is static
// plus dynamic, dynamic beyond the static limit by opt-in (the CUDA backend raises the kernel's
// limit for such a launch).
constexpr unsigned kMaxThreads = KDA_EMU_MAX_THREADS_PER_BLOCK;
constexpr unsigned kMaxBlock[3] = {KDA_EMU_MAX_BLOCK_X, KDA_EMU_MAX_BLOCK_Y, KDA_EMU_MAX_BLOCK_Z};
constexpr unsigned kMaxGrid[3] = {KDA_EMU_MAX_GRID_X, KDA_EMU_MAX_GRID_Y, KDA_EMU_MAX_GRID_Z};
constexpr unsigned kMaxStaticShared = KDA_EMU_MAX_STATIC_SHARED;
constexpr unsigned kMaxShared = KDA_EMU_MAX_SHARED;
// The alignment of a launch's dynamic shared memory: at least the 16 bytes cp.async and ldmatrix
// need of its rows, as on the device.
constexpr size_t kDynamicSharedAlignment = 128;

struct RegisteredEntry {
    const char* name;
    Invoker invoke;
    unsigned arity;
    std::string params;
    std::vector<ParamLayout> layouts;
};

// A function-local static: the entry's registration runs at load time, in any order with this
// unit's other initialisers.
std::vector<RegisteredEntry>& registry() {
    static std::vector<RegisteredEntry> entries;
    return entries;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    char buffer[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof buffer, fmt, args);
    va_end(args);
    return buffer;
}

// Thrown out of a wait when the launch has failed: unwinds the kernel back to its thread.
struct Abort {};

// Why a launch failed: what kda_emu_fault reports (kda_abi.h).
struct Failure {
    unsigned kind = KDA_EMU_FAULT_NONE;
    // Whether `block` and `thread` name the thread that failed.
    bool has_thread = false;
    uint3 block{}, thread{};
    std::string message;
    // For an access outside its memory: the parameter it went through (or -1), the array or
    // "dynamic shared memory" (or ""), and the element index (a byte's in dynamic shared memory).
    int parameter = -1;
    std::string variable;
    long long index = 0;

    bool failed() const { return kind != KDA_EMU_FAULT_NONE; }
    static Failure of(unsigned kind, std::string message) {
        Failure failure;
        failure.kind = kind;
        failure.message = std::move(message);
        return failure;
    }
};

struct PendingCopy {
    void* dst;
    unsigned char bytes[16];
    unsigned size;
};

struct Region;

// Where a thread's kernel went outside its memory or raised a fault, as the fault handler or the
// bounds handler found it before jumping back to the thread's runtime (which formats it: no
// allocation, no lock in a handler).
struct AccessFault {
    // A guard page: the region it guards, the address, and whether the access wrote (1), read (0)
    // or either (-1, where the fault does not tell).
    const Region* region = nullptr;
    uintptr_t address = 0;
    int write = -1;
    // The signal the fault handler caught and its si_code (0 from the access checks and the
    // bounds handler, which raise none). Without a region, the kernel's fault outside the guard
    // pages: `address` is the signal's si_addr (the faulting instruction's for SIGFPE and SIGILL),
    // `write` as for a guard page.
    int signal = 0;
    int code = 0;
    // UBSan's bounds check: the index expression's place, the array's type as the compiler names
    // it (quoted), and the index.
    const char* file = nullptr;
    unsigned line = 0, column = 0;
    const char* array_type = nullptr;
    long long index = 0;
};

// One CUDA thread's identity and its asynchronous copies.
struct ThreadState {
    unsigned linear = 0, warp = 0, lane = 0;
    std::vector<PendingCopy> uncommitted;
    std::vector<std::vector<PendingCopy>> groups;  // committed, oldest first
#ifdef KDA_EMU_CHECKED
    // While the kernel runs (`armed`; not while the thread is in the monitor, see InRuntime),
    // where the handlers jump back to, and what they found.
    sigjmp_buf jump;
    volatile sig_atomic_t armed = 0;
    AccessFault fault;
#endif
};
thread_local ThreadState* self = nullptr;

#ifdef KDA_EMU_CHECKED
// While one lives, the calling kernel thread runs the monitor's code (which holds the block's lock
// or waits), not the kernel's: it is disarmed, so the fault handlers do not jump out of it, which
// would leave the lock held and the block hung. A fault there is the emulator's own and goes to
// the handler the runtime's replaced, as any fault outside a kernel does.
class InRuntime {
   public:
    InRuntime() : armed_(self->armed) { self->armed = 0; }
    ~InRuntime() { self->armed = armed_; }
    InRuntime(const InRuntime&) = delete;
    InRuntime& operator=(const InRuntime&) = delete;

   private:
    const sig_atomic_t armed_;
};
#else
struct InRuntime {
    InRuntime() {}  // user-provided: a scope is not an unused variable
};
#endif

// The most bytes one lane deposits in a gather (kda_emu::gather).
constexpr unsigned kMaxGatherRecord = 32;

// The `source` of an exchange that is a vote (kda_emu::ballot): each lane gets the mask of the
// lanes that deposited a non-zero value.
constexpr int kBallot = -2;

// One warp's collectives: an exchange (a shuffle, __syncwarp) or a gather (ldmatrix, mma). Both
// go through the same arrival state, so lanes in different collectives are told apart by `op`.
struct Warp {
    unsigned lanes = 0;    // the lanes this warp has (a block's last warp may be partial)
    unsigned arrived = 0;  // lanes waiting in the current collective
    unsigned exited = 0;
    unsigned mask = 0;
    const char* op = nullptr;
    uint64_t generation = 0;
    uint64_t values[32] = {};
    int sources[32] = {};
    uint64_t results[32] = {};
    // A gather: the records of the lanes that arrived, and those of the last completed gather,
    // lane by lane at `record_bytes` each, which each lane copies out after it wakes (the next
    // gather cannot complete before every lane has arrived at it, so they stay until then).
    unsigned record_bytes = 0;
    unsigned char records[32][kMaxGatherRecord] = {};
    unsigned char gathered[32 * kMaxGatherRecord] = {};
    std::condition_variable done;
    SyncPoint syncwarp[kSyncRing];  // the memory order of __syncwarp, by generation
};

// The waits of one block.
class Monitor {
   public:
    void reset(unsigned threads) {
        threads_ = threads;
        exited_ = at_barrier_ = 0;
        failed_ = false;
        failure_ = Failure{};
        warps_ = std::vector<Warp>((threads + 31) / 32);
        for (unsigned w = 0; w < warps_.size(); ++w) {
            const unsigned count = std::min(32u, threads - 32 * w);
            warps_[w].lanes = count == 32 ? 0xffffffffu : (1u << count) - 1;
        }
    }

    void barrier() {
        InRuntime in_runtime;
        MonitorScope scope;
        std::unique_lock<std::mutex> lock(mutex_);
        if (failed_) throw Abort{};
        if (exited_ > 0)
            fail(lock, format("__syncthreads reached after %u of the block's %u threads returned: a barrier "
                              "every thread of the block must reach",
                              exited_, threads_));
        const SyncPoint& point = barrier_sync_[barrier_generation_ % kSyncRing];
        release(point);
        if (++at_barrier_ == threads_) {
            at_barrier_ = 0;
            ++barrier_generation_;
            barrier_done_.notify_all();
            acquire(point);
            return;
        }
        const uint64_t generation = barrier_generation_;
        check_deadlock(lock);
        barrier_done_.wait(lock, [&] { return failed_ || barrier_generation_ != generation; });
        if (barrier_generation_ == generation) throw Abort{};
        acquire(point);
    }

    // `orders_memory`: the exchange is a __syncwarp, which orders the memory accesses of its lanes.
    // A `source` of kBallot: the exchange is a vote.
    uint64_t exchange(const char* op, unsigned mask, uint64_t value, int source, bool orders_memory) {
        InRuntime in_runtime;
        MonitorScope scope;
        std::unique_lock<std::mutex> lock(mutex_);
        if (failed_) throw Abort{};
        Warp& warp = join(lock, op, mask);
        const unsigned lane = self->lane;
        if (source >= 0 && (source > 31 || !(mask & (1u << source))))
            fail(lock, format("%s reads lane %d, outside the mask 0x%08x", op, source, mask));
        check_returned(lock, warp, op, mask);
        const SyncPoint& point = warp.syncwarp[warp.generation % kSyncRing];
        if (orders_memory) release(point);
        warp.values[lane] = value;
        warp.sources[lane] = source;
        warp.arrived |= 1u << lane;
        if (warp.arrived == mask) {
            uint64_t ballot = 0;
            for (unsigned i = 0; i < 32; ++i)
                if ((mask & (1u << i)) && warp.values[i] != 0) ballot |= 1u << i;
            for (unsigned i = 0; i < 32; ++i)
                if (mask & (1u << i))
                    warp.results[i] = warp.sources[i] == kBallot ? ballot
                                      : warp.sources[i] < 0  ? warp.values[i]
                                                             : warp.values[warp.sources[i]];
            complete(warp);
        } else {
            wait_for(lock, warp);
        }
        if (orders_memory) acquire(point);
        return warp.results[lane];
    }

    // A collective of the whole warp: every lane deposits `bytes` from `record`; once all 32 have,
    // every lane gets all 32 records, lane by lane, in `all` (32 * bytes). One wait, whatever the
    // size, where a word-by-word exchange would take one per word and source lane.
    void gather(const char* op, const void* record, unsigned bytes, void* all) {
        InRuntime in_runtime;
        MonitorScope scope;
        std::unique_lock<std::mutex> lock(mutex_);
        if (failed_) throw Abort{};
        const unsigned mask = 0xffffffffu;
        if (bytes == 0 || bytes > kMaxGatherRecord)
            fail(lock, format("%s gathers %u bytes a lane: the emulator takes 1 to %u", op, bytes, kMaxGatherRecord));
        const bool first = warp_of_self().arrived == 0;
        Warp& warp = join(lock, op, mask);
        if (first) {
            warp.record_bytes = bytes;
        } else if (warp.record_bytes != bytes) {
            fail(lock, format("lanes of warp %u disagree: %s of %u bytes a lane here, of %u waiting", self->warp, op,
                              bytes, warp.record_bytes));
        }
        check_returned(lock, warp, op, mask);
        const unsigned lane = self->lane;
        memcpy(warp.records[lane], record, bytes);
        warp.arrived |= 1u << lane;
        if (warp.arrived == mask) {
            for (unsigned i = 0; i < 32; ++i) memcpy(warp.gathered + i * bytes, warp.records[i], bytes);
            complete(warp);
        } else {
            wait_for(lock, warp);
        }
        memcpy(all, warp.gathered, 32 * static_cast<size_t>(bytes));
    }

    // The calling thread has returned from the kernel (or unwound out of it).
    void thread_exited() {
        std::unique_lock<std::mutex> lock(mutex_);
        ++exited_;
        Warp& warp = warps_[self->warp];
        warp.exited |= 1u << self->lane;
        if (!failed_) {
            if (at_barrier_ > 0) {
                record(format("returned while %u threads of the block wait at __syncthreads: a barrier every "
                              "thread of the block must reach",
                              at_barrier_));
            } else if (warp.arrived != 0 && (warp.mask & (1u << self->lane))) {
                record(format("returned while lanes 0x%08x of warp %u wait for it in %s (mask 0x%08x)", warp.arrived,
                              self->warp, warp.op, warp.mask));
            } else if (exited_ < threads_ && waiting() + exited_ == threads_) {
                record(deadlock());
            }
        }
        if (exited_ == threads_) all_exited_.notify_all();
    }

    // The lanes of the caller's warp that have not returned.
    unsigned active_lanes() {
        InRuntime in_runtime;
        MonitorScope scope;
        std::unique_lock<std::mutex> lock(mutex_);
        const Warp& warp = warp_of_self();
        return warp.lanes & ~warp.exited;
    }

    // The calling thread left its kernel through an access outside its memory: `access`'s kind,
    // message and access, at the caller's block and thread.
    void fail_access(const Failure& access) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!record(access.message)) return;
        failure_.kind = access.kind;
        failure_.parameter = access.parameter;
        failure_.variable = access.variable;
        failure_.index = access.index;
    }

    // Called by a thread that did not raise the failure itself but saw something fail.
    void fail_here(std::string message) {
        InRuntime in_runtime;
        std::unique_lock<std::mutex> lock(mutex_);
        fail(lock, std::move(message));
    }

    // Waits for every thread of the block; the failure, if any.
    Failure wait_block() {
        std::unique_lock<std::mutex> lock(mutex_);
        all_exited_.wait(lock, [&] { return exited_ == threads_; });
        return failure_;
    }

   private:
    Warp& warp_of_self() { return warps_[self->warp]; }

    // The calling lane joins its warp's collective `op` over `mask`: the checks every collective
    // makes (the lane is in the mask, the warp has the lanes, the lanes already waiting are in the
    // same collective); the warp.
    Warp& join(std::unique_lock<std::mutex>& lock, const char* op, unsigned mask) {
        Warp& warp = warp_of_self();
        const unsigned lane = self->lane, bit = 1u << lane;
        if (!(mask & bit)) fail(lock, format("%s with mask 0x%08x, which leaves out the calling lane %u", op, mask, lane));
        if (mask & ~warp.lanes)
            fail(lock, format("%s with mask 0x%08x names lanes warp %u does not have (lanes 0x%08x)", op, mask,
                              self->warp, warp.lanes));
        if (warp.arrived == 0) {
            warp.mask = mask;
            warp.op = op;
        } else if (warp.mask != mask || strcmp(warp.op, op) != 0) {
            fail(lock, format("lanes of warp %u disagree: %s with mask 0x%08x here, %s with mask 0x%08x waiting",
                              self->warp, op, mask, warp.op, warp.mask));
        }
        return warp;
    }

    void check_returned(std::unique_lock<std::mutex>& lock, const Warp& warp, const char* op, unsigned mask) {
        if (warp.exited & mask)
            fail(lock, format("%s with mask 0x%08x, but lanes 0x%08x of warp %u have returned", op, mask,
                              warp.exited & mask, self->warp));
    }

    // The last lane has arrived: the collective completes and its lanes go on.
    void complete(Warp& warp) {
        warp.arrived = 0;
        ++warp.generation;
        warp.done.notify_all();
    }

    // Waits for the collective the caller joined to complete; Abort if the launch fails first.
    void wait_for(std::unique_lock<std::mutex>& lock, Warp& warp) {
        const uint64_t generation = warp.generation;
        check_deadlock(lock);
        warp.done.wait(lock, [&] { return failed_ || warp.generation != generation; });
        if (warp.generation == generation) throw Abort{};
    }

    unsigned waiting() const {
        unsigned count = at_barrier_;
        for (const Warp& warp : warps_) count += __builtin_popcount(warp.arrived);
        return count;
    }

    std::string deadlock() const {
        std::string message = format("deadlock: %u threads wait at __syncthreads", at_barrier_);
        for (unsigned w = 0; w < warps_.size(); ++w)
            if (warps_[w].arrived)
                message += format("; lanes 0x%08x of warp %u wait in %s for lanes 0x%08x", warps_[w].arrived, w,
                                  warps_[w].op, warps_[w].mask & ~warps_[w].arrived);
        return message;
    }

    // The caller is about to wait: if every thread that has not returned waits too, none can go on.
    void check_deadlock(std::unique_lock<std::mutex>& lock) {
        if (waiting() + exited_ == threads_) fail(lock, deadlock());
    }

    // Whether this is the launch's failure (the first one recorded).
    bool record(std::string message) {
        if (failed_) return false;
        failed_ = true;
        failure_.kind = KDA_EMU_FAULT_KERNEL;
        failure_.has_thread = true;
        failure_.block = blockIdx;
        failure_.thread = threadIdx;
        failure_.message = format("block (%u, %u, %u), thread (%u, %u, %u): ", blockIdx.x, blockIdx.y, blockIdx.z,
                                  threadIdx.x, threadIdx.y, threadIdx.z) +
                           message;
        barrier_done_.notify_all();
        for (Warp& warp : warps_) warp.done.notify_all();
        return true;
    }

    [[noreturn]] void fail(std::unique_lock<std::mutex>&, std::string message) {
        record(std::move(message));
        throw Abort{};
    }

    std::mutex mutex_;
    std::condition_variable barrier_done_, all_exited_;
    unsigned threads_ = 0, exited_ = 0, at_barrier_ = 0;
    uint64_t barrier_generation_ = 0;
    SyncPoint barrier_sync_[kSyncRing];  // the memory order of __syncthreads, by generation
    std::vector<Warp> warps_;
    bool failed_ = false;
    Failure failure_;
};

Monitor monitor;
// One launch at a time per module: the blocks share the module's static __shared__ storage and
// the launch's dynamic shared memory.
std::mutex launch_mutex;

// The running launch's dynamic shared memory (size 0 when it asked for none).
struct DynamicShared {
    unsigned char* bytes = nullptr;
    unsigned size = 0;
} dynamic;

// The memory one launch's kernel reaches: its arguments as it receives them, and the dynamic
// shared memory (`dynamic`, while the launch runs).
//
// Without a sanitizer each view is staged: copied for the launch into pages of its own between
// guards (kGuardBytes of PROT_NONE), and the kernel's loads and stores are checked against the
// regions' bytes before they happen (check_access), so a read or write outside its extent, on
// either side, is the launch's failure naming the thread, the parameter and the element. An access
// the instrumentation does not see faults in the guard past the region, and the fault handler
// below makes that fault the failure. A view ends exactly at its guard, so its address modulo 16
// is fixed by its end, except a view off 16-byte alignment that would land on it: it keeps its
// offset modulo 16 (the kernel's unaligned path stays the one taken, as the emulated suite's views
// at offset 1 need) and ends 16 - offset bytes before its guard. The dynamic shared memory keeps
// its 128-byte alignment and ends within 127 bytes of its guard. The rest of each region's pages
// holds canaries, checked after every block: a write there the instrumentation did not see fails
// the launch too, naming the block. Written views are copied back after the launch, failed or not.
//
// Under a sanitizer the arguments go through as they are (the driver allocated each view at
// exactly its extent) and the dynamic shared memory is an allocation of its size: the sanitizer
// checks every access.
#ifdef KDA_EMU_CHECKED
// One staged region: a view (of parameter `parameter`) or the dynamic shared memory (-1). Its
// pages run from `first` to `guard`, the PROT_NONE guard after it; the kernel's bytes are
// [begin, begin + bytes), canaries the rest.
struct Region {
    int parameter;
    unsigned element_size;  // 1 for the dynamic shared memory, whose index is a byte's
    bool written;           // copied back to `original` after the launch
    void* original;
    size_t bytes;
    unsigned char* first;
    unsigned char* begin;
    unsigned char* guard;
};

// The running launch's staged memory, for the fault handler, which runs on whatever thread
// faults: [guarded_begin, guarded_end) is its mapping (empty between launches, one launch at a
// time per library: launch_mutex); `live_regions` and `page_size` are read only by a thread of the
// launch, which started after they were set.
std::atomic<uintptr_t> guarded_begin{0}, guarded_end{0};
const std::vector<Region>* live_regions = nullptr;
size_t page_size = 0;

// The PROT_NONE bytes before the first region and after each: an access that far outside its
// memory is still in the launch's mapping, where the runtime attributes it to the nearest region,
// instead of in whatever memory lies beyond (4,096 elements of 16 bytes, 16 times over). A
// multiple of any page size; address space only.
constexpr size_t kGuardBytes = size_t{1} << 20;

// What the bytes around a region's own hold, so that a write there shows.
constexpr unsigned char kCanary = 0xa5;

// The first byte of [from, to) that is not a canary, or null.
const unsigned char* first_changed(const unsigned char* from, const unsigned char* to) {
    static const std::vector<unsigned char> canaries(4096, kCanary);
    while (from < to) {
        const size_t n = std::min(static_cast<size_t>(to - from), canaries.size());
        if (memcmp(from, canaries.data(), n) != 0)
            for (size_t i = 0; i < n; ++i)
                if (from[i] != kCanary) return from + i;
        from += n;
    }
    return nullptr;
}

// The element of `region` at `address`, counted from its first (negative before it).
long long element_index(const Region& region, uintptr_t address) {
    const long long offset = static_cast<long long>(address - reinterpret_cast<uintptr_t>(region.begin));
    const long long size = region.element_size;
    return offset >= 0 ? offset / size : -((-offset + size - 1) / size);
}

// The most bytes a view may be staged with: far beyond any host memory, and far from overflow.
constexpr unsigned long long kMaxStagedBytes = 1ull << 46;

// The signals a kernel's own faults raise, which the fault handler makes its launch's failure:
// an access the processor refuses (SIGSEGV in a guard page, through a wild or null pointer, or at
// an address outside the address space; SIGBUS), an integer division by zero (SIGFPE), and a trap
// (SIGILL: `__builtin_trap`, or what the compiler puts on a path it proves undefined, such as one
// dereferencing a null pointer). Unhandled, each would end the process, the test binary with all
// its other tests, where the caller needs the launch's Err. Each with the handler this library's
// replaced (Rust's, another library's, or the default action), for the faults that are not this
// library's.
struct FaultSignal {
    int number;
    struct sigaction previous;
};
FaultSignal fault_signals[] = {{SIGSEGV, {}}, {SIGBUS, {}}, {SIGFPE, {}}, {SIGILL, {}}};

// The running launch's worker threads, for the fault handler, which must tell whether the thread
// that faults is one of them without touching thread-local storage: a thread's first access to a
// dlopen'ed library's (on a thread of Rust or of another library) may allocate in the C library,
// which a handler may not. One launch at a time per library (launch_mutex), so one table; a slot
// names its worker by kernel thread id for as long as the worker runs blocks.
struct WorkerSlot {
    std::atomic<pid_t> tid{0};
    std::atomic<ThreadState*> state{nullptr};
};
WorkerSlot worker_slots[kMaxThreads];

// Names the calling worker, thread `linear` of the block, in its slot for as long as it lives.
class Enlisted {
   public:
    Enlisted(unsigned linear, ThreadState& state) : slot_(worker_slots[linear]) {
        slot_.state.store(&state, std::memory_order_relaxed);
        slot_.tid.store(gettid(), std::memory_order_release);
    }
    ~Enlisted() { slot_.tid.store(0, std::memory_order_release); }
    Enlisted(const Enlisted&) = delete;
    Enlisted& operator=(const Enlisted&) = delete;

   private:
    WorkerSlot& slot_;
};

// The calling thread's state if it is a worker of this library's running launch and runs the
// kernel (armed), else null. Async-signal-safe: a system call and atomics, no thread-local storage.
ThreadState* armed_worker() {
    const pid_t tid = gettid();
    for (const WorkerSlot& slot : worker_slots) {
        if (slot.tid.load(std::memory_order_acquire) != tid) continue;
        ThreadState* const state = slot.state.load(std::memory_order_relaxed);
        return state->armed ? state : nullptr;
    }
    return nullptr;
}

// The region an `address` outside every region's bytes belongs to: the one whose bytes it lies
// closest to (a guard between two regions lies past the first and before the second).
const Region* region_nearest(uintptr_t address) {
    const Region* nearest = nullptr;
    uintptr_t nearest_distance = UINTPTR_MAX;
    for (const Region& region : *live_regions) {
        const uintptr_t begin = reinterpret_cast<uintptr_t>(region.begin), end = begin + region.bytes;
        const uintptr_t distance = address < begin ? begin - address : address >= end ? address - end + 1 : 0;
        if (distance < nearest_distance) {
            nearest = &region;
            nearest_distance = distance;
        }
    }
    return nearest;
}

// Whether the faulting access wrote: 1, 0, or -1 where the fault does not tell.
int fault_was_write(void* context) {
#if defined(__x86_64__)
    // The page fault's error code, bit 1 set for a write.
    return (static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? 1 : 0;
#else
    (void)context;
    return -1;
#endif
}

// Whether the signal came from a fault of the thread's own (si_code > 0: the processor's, through
// the kernel): one another thread or process sent (kill, tgkill, sigqueue) is never a launch's
// failure, even when it lands on a kernel's thread.
bool raised_by_fault(const siginfo_t* info) { return info->si_code > 0; }

// Hands a signal that is not this library's to the handler this one replaced, as if this one had
// never been installed.
void chain(int number, siginfo_t* info, void* context) {
    struct sigaction previous {};  // SIG_DFL
    for (const FaultSignal& handled : fault_signals)
        if (handled.number == number) previous = handled.previous;
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(number, info, context);
    } else if (previous.sa_handler == SIG_IGN && !raised_by_fault(info)) {
        // A signal sent to a process that ignores it.
    } else if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        // A fault cannot be ignored: on return the faulting instruction runs again, now with the
        // default action. A sent signal does not repeat, so it is sent again, to that action.
        signal(number, SIG_DFL);
        if (!raised_by_fault(info)) raise(number);
    } else {
        previous.sa_handler(number);
    }
}

// A fault of a thread of this library's running launch while it runs the kernel: recorded for the
// thread, which leaves the kernel (run_kernel makes it the launch's failure). One in a guard page
// is an access out of bounds, attributed to the nearest region; any other is the kernel's fault,
// told by its signal and code. Any other thread's fault, or a signal sent, goes to the handler
// this one replaced. Async-signal-safe: a system call, atomics, the thread's state through the
// worker table, siglongjmp.
void on_fault(int number, siginfo_t* info, void* context) {
    ThreadState* const thread = raised_by_fault(info) ? armed_worker() : nullptr;
    if (thread == nullptr) {
        chain(number, info, context);
        return;
    }
    const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
    AccessFault& fault = thread->fault;
    fault = AccessFault{};
    fault.address = address;
    fault.signal = number;
    fault.code = info->si_code;
    // A page fault's error code tells a write from a read; a general-protection fault's does not.
    const bool page_fault = number == SIGSEGV && (info->si_code == SEGV_MAPERR || info->si_code == SEGV_ACCERR);
    if (page_fault) fault.write = fault_was_write(context);
    if (number == SIGSEGV && address >= guarded_begin.load(std::memory_order_acquire) &&
        address < guarded_end.load(std::memory_order_acquire))
        fault.region = region_nearest(address);
    siglongjmp(thread->jump, 1);
}

// Installs on_fault for each of fault_signals, once per library: each library has its own runtime,
// guard pages and workers. Libraries are linked -z nodelete, so a handler another one chained to
// stays mapped. Whether they are.
bool fault_handlers_installed() {
    static const bool installed = [] {
        struct sigaction action {};
        action.sa_sigaction = on_fault;
        // On the alternate stack where the thread has one: Rust's handler, to which a fault on a
        // Rust thread chains, tells a stack overflow there.
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        for (FaultSignal& handled : fault_signals)
            if (sigaction(handled.number, &action, &handled.previous) != 0) return false;
        return true;
    }();
    return installed;
}

class LaunchMemory {
   public:
    LaunchMemory() = default;
    LaunchMemory(const LaunchMemory&) = delete;
    LaunchMemory& operator=(const LaunchMemory&) = delete;
    ~LaunchMemory() {
        if (!mapping_) return;
        guarded_end.store(0, std::memory_order_release);
        guarded_begin.store(0, std::memory_order_release);
        live_regions = nullptr;
        dynamic = DynamicShared{};
        munmap(mapping_, length_);
    }

    // Stages the views among `args` (parameter i laid out as `layouts[i]`, its view `sizes[i]`
    // bytes) and `dynamic_bytes` of dynamic shared memory: "", or what the emulator could not do.
    std::string prepare(const std::vector<ParamLayout>& layouts, void* const* args, const unsigned long long* sizes,
                        unsigned dynamic_bytes) {
        if (!fault_handlers_installed()) return format("install its fault handlers: %s", strerror(errno));
        page_size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        values_.assign(layouts.size(), nullptr);
        pointers_.assign(args, args + layouts.size());
        // Each region's data pages and the bytes between its own and its guard; one mapping for
        // all, a guard before the first region and one after each.
        std::vector<std::pair<size_t, size_t>> plans;  // (pages, tail)
        size_t total = kGuardBytes;
        const auto plan = [&](size_t bytes, size_t tail) {
            const size_t pages = (bytes + tail + page_size - 1) / page_size;
            plans.emplace_back(pages, tail);
            total += pages * page_size + kGuardBytes;
        };
        for (size_t i = 0; i < layouts.size(); ++i) {
            if (layouts[i].element_size == 0) continue;
            void* view = *static_cast<void* const*>(args[i]);
            // A null pointer (a `nullable` parameter left out) stays null: the kernel tests it.
            if (view == nullptr) continue;
            if (sizes[i] > kMaxStagedBytes) return format("stage a view of %llu bytes (parameter %zu)", sizes[i], i);
            const size_t bytes = static_cast<size_t>(sizes[i]);
            const size_t offset = reinterpret_cast<uintptr_t>(view) % 16;
            regions_.push_back(Region{static_cast<int>(i), layouts[i].element_size, layouts[i].written, view, bytes,
                                      nullptr, nullptr, nullptr});
            plan(bytes, offset != 0 && bytes % 16 == 0 ? 16 - offset : 0);
        }
        regions_.push_back(Region{-1, 1, false, nullptr, dynamic_bytes, nullptr, nullptr, nullptr});
        plan(dynamic_bytes, (kDynamicSharedAlignment - dynamic_bytes % kDynamicSharedAlignment) % kDynamicSharedAlignment);
        void* mapping = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mapping == MAP_FAILED) return format("map %zu bytes for the launch's memory: %s", total, strerror(errno));
        mapping_ = static_cast<unsigned char*>(mapping);
        length_ = total;
        unsigned char* at = mapping_ + kGuardBytes;
        for (size_t r = 0; r < regions_.size(); ++r) {
            Region& region = regions_[r];
            const size_t data = plans[r].first * page_size;
            region.first = at;
            region.guard = at + data;
            region.begin = region.guard - plans[r].second - region.bytes;
            if (data > 0 && mprotect(region.first, data, PROT_READ | PROT_WRITE) != 0)
                return format("map %zu bytes for the launch's memory: %s", data, strerror(errno));
            memset(region.first, kCanary, data);
            if (region.parameter >= 0) {
                if (region.bytes > 0) memcpy(region.begin, region.original, region.bytes);
                values_[static_cast<size_t>(region.parameter)] = region.begin;
                pointers_[static_cast<size_t>(region.parameter)] = &values_[static_cast<size_t>(region.parameter)];
            }
            at = region.guard + kGuardBytes;
        }
        dynamic = DynamicShared{regions_.back().begin, dynamic_bytes};
        live_regions = &regions_;
        guarded_begin.store(reinterpret_cast<uintptr_t>(mapping_), std::memory_order_release);
        guarded_end.store(reinterpret_cast<uintptr_t>(mapping_) + length_, std::memory_order_release);
        return "";
    }

    // What the kernel receives: args[i] points to parameter i's value.
    void* const* args() const { return pointers_.data(); }

    // After block `block`: a write into the canaries, which no guard page caught, as the launch's
    // failure (no thread: the block's have all returned), or no failure.
    Failure check(const uint3& block) const {
        for (const Region& region : regions_) {
            const unsigned char* changed = first_changed(region.first, region.begin);
            if (!changed) changed = first_changed(region.begin + region.bytes, region.guard);
            if (!changed) continue;
            Failure failure = Failure::of(KDA_EMU_FAULT_OUT_OF_BOUNDS, "");
            failure.index = element_index(region, reinterpret_cast<uintptr_t>(changed));
            const std::string where = format("block (%u, %u, %u): ", block.x, block.y, block.z);
            const char* found = "was written (found after the block, by one of its threads)";
            if (region.parameter >= 0) {
                failure.parameter = region.parameter;
                failure.message = where + format("element %lld of parameter %d, outside its %zu elements, %s",
                                                 failure.index, region.parameter, region.bytes / region.element_size,
                                                 found);
            } else {
                failure.variable = "dynamic shared memory";
                failure.message = where + format("byte %lld of the launch's dynamic shared memory, outside its %zu "
                                                 "bytes, %s",
                                                 failure.index, region.bytes, found);
            }
            return failure;
        }
        return Failure{};
    }

    // Copies the written views back to the caller's.
    void copy_back() const {
        for (const Region& region : regions_)
            if (region.written && region.bytes > 0) memcpy(region.original, region.begin, region.bytes);
    }

   private:
    std::vector<Region> regions_;
    std::vector<void*> values_;    // each staged view's pointer, which the kernel gets
    std::vector<void*> pointers_;  // what the kernel receives: &values_[i] for a view, args[i] else
    unsigned char* mapping_ = nullptr;
    size_t length_ = 0;
};

// The failure of a thread that left its kernel through `fault` (defined with the bounds handler).
Failure access_failure(const AccessFault& fault);

// Runs the kernel on the calling thread, where the fault handler, the access checks and the bounds
// handler can jump back to: the failure when one did, else none.
Failure run_kernel(const RegisteredEntry& entry, void* const* args) {
    if (sigsetjmp(self->jump, 0) != 0) {
        self->armed = 0;
        if (self->fault.signal != 0) {
            // From the fault handler, its signal still blocked: sigsetjmp kept no mask (which
            // costs a system call per block), so unblock it here, or the thread's next fault of
            // that kind would end the process.
            sigset_t raised;
            sigemptyset(&raised);
            sigaddset(&raised, self->fault.signal);
            pthread_sigmask(SIG_UNBLOCK, &raised, nullptr);
        }
        return access_failure(self->fault);
    }
    self->armed = 1;
    entry.invoke(args);
    self->armed = 0;
    return Failure{};
}

// The kernel has left (returned, faulted or unwound): the handlers no longer jump back into it.
void disarm() { self->armed = 0; }
#else
// Without the runtime's checks there is no fault handler to find the workers.
struct Enlisted {
    Enlisted(unsigned, ThreadState&) {}
};

class LaunchMemory {
   public:
    LaunchMemory() = default;
    LaunchMemory(const LaunchMemory&) = delete;
    LaunchMemory& operator=(const LaunchMemory&) = delete;
    ~LaunchMemory() {
        dynamic = DynamicShared{};
        free(storage_);
    }

    std::string prepare(const std::vector<ParamLayout>& layouts, void* const* args, const unsigned long long*,
                        unsigned dynamic_bytes) {
        pointers_.assign(args, args + layouts.size());
        // Allocated for none too: an `extern __shared__` array is a reference to this memory, which
        // must not be bound to null (UBSan reports that, although a kernel given no dynamic shared
        // memory never reads it), and the sanitizers' allocation of zero bytes is a unique address
        // every access through which they report.
        if (posix_memalign(&storage_, kDynamicSharedAlignment, dynamic_bytes) != 0)
            return format("allocate %u bytes of dynamic shared memory", dynamic_bytes);
        dynamic = DynamicShared{static_cast<unsigned char*>(storage_), dynamic_bytes};
        return "";
    }
    void* const* args() const { return pointers_.data(); }
    Failure check(const uint3&) const { return Failure{}; }
    void copy_back() const {}

   private:
    std::vector<void*> pointers_;
    void* storage_ = nullptr;
};

Failure run_kernel(const RegisteredEntry& entry, void* const* args) {
    entry.invoke(args);
    return Failure{};
}
void disarm() {}
#endif

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// The linear block indices of the grid, shuffled (Fisher-Yates) by `seed`.
std::vector<uint64_t> block_order(uint64_t blocks, uint64_t seed) {
    std::vector<uint64_t> order(blocks);
    for (uint64_t i = 0; i < blocks; ++i) order[i] = i;
    uint64_t state = seed;
    for (uint64_t i = blocks; i > 1; --i) std::swap(order[i - 1], order[splitmix64(state) % i]);
    return order;
}

// The bytes of the section of __shared__ variables: the kernel's own, or under AddressSanitizer every
// kernel's of the module with their redzones (geometry_problem says why).
size_t static_shared_bytes() {
    return __start_kda_emu_shared ? static_cast<size_t>(__stop_kda_emu_shared - __start_kda_emu_shared) : 0;
}

// NaN bytes into the module's __shared__ variables, for a block to find where it has not written.
// Under AddressSanitizer each variable is followed by a redzone (a poisoned gap of at least 32
// bytes), so an index one past an array into the next variable, which corrupts that variable on
// the device, is a report: the fill leaves the redzones poisoned.
void fill_static_shared() {
    char* at = __start_kda_emu_shared;
    char* const end = at + static_shared_bytes();
#ifdef KDA_EMU_ASAN
    while (at < end) {
        char* const poisoned = static_cast<char*>(__asan_region_is_poisoned(at, static_cast<size_t>(end - at)));
        char* const stop = poisoned ? poisoned : end;
        memset(at, 0xff, static_cast<size_t>(stop - at));
        at = stop;
        while (at < end && __asan_address_is_poisoned(at)) ++at;
    }
#else
    if (end > at) memset(at, 0xff, static_cast<size_t>(end - at));
#endif
}

// Whether the `bytes` at `at` lie in the block's shared memory, static or dynamic.
bool in_shared(uintptr_t at, size_t bytes) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(__start_kda_emu_shared);
    const uintptr_t dynamic_begin = reinterpret_cast<uintptr_t>(dynamic.bytes);
    return (static_shared_bytes() > 0 && at >= begin && at + bytes <= begin + static_shared_bytes()) ||
           (dynamic.size > 0 && at >= dynamic_begin && at + bytes <= dynamic_begin + dynamic.size);
}

// Why the geometry cannot launch on the device the emulator stands for, or "".
std::string geometry_problem(const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared) {
    const uint64_t threads = static_cast<uint64_t>(block[0]) * block[1] * block[2];
    if (block[0] == 0 || block[1] == 0 || block[2] == 0 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
        return format("a grid (%u, %u, %u) of blocks (%u, %u, %u) has an empty dimension", grid[0], grid[1], grid[2],
                      block[0], block[1], block[2]);
    if (threads > kMaxThreads || block[0] > kMaxBlock[0] || block[1] > kMaxBlock[1] || block[2] > kMaxBlock[2])
        return format("a block (%u, %u, %u) of %llu threads: the device allows at most %u threads per block "
                      "(x up to %u, y up to %u, z up to %u)",
                      block[0], block[1], block[2], static_cast<unsigned long long>(threads), kMaxThreads,
                      kMaxBlock[0], kMaxBlock[1], kMaxBlock[2]);
    if (grid[0] > kMaxGrid[0] || grid[1] > kMaxGrid[1] || grid[2] > kMaxGrid[2])
        return format("a grid (%u, %u, %u): the device allows x up to %u, y up to %u, z up to %u", grid[0], grid[1],
                      grid[2], kMaxGrid[0], kMaxGrid[1], kMaxGrid[2]);
#ifdef KDA_EMU_ASAN
    // AddressSanitizer's table of the unit's globals keeps every kernel's __shared__ variables of the
    // module from the linker's garbage collection, redzones between them: the section is not this
    // kernel's shared memory. The plain and ThreadSanitizer builds check it.
    const size_t static_bytes = 0;
#else
    const size_t static_bytes = static_shared_bytes();
    if (static_bytes > kMaxStaticShared)
        return format("%zu bytes of static shared memory in this module: over the device's %u per block",
                      static_bytes, kMaxStaticShared);
#endif
    if (static_bytes + dynamic_shared > kMaxShared)
        return format("%zu bytes of shared memory (%zu static, %u dynamic): over the device's %u per block",
                      static_bytes + dynamic_shared, static_bytes, dynamic_shared, kMaxShared);
    return "";
}

// Runs every block of the launch on `threads` workers, on `memory`; the failure, if any.
Failure run_blocks(const RegisteredEntry& entry, const LaunchMemory& memory, const unsigned grid[3], uint64_t seed) {
    void* const* args = memory.args();
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const std::vector<uint64_t> order = block_order(static_cast<uint64_t>(grid[0]) * grid[1] * grid[2], seed);
    std::mutex start_mutex;
    std::condition_variable started;
    uint64_t current = 0;  // 1 + the position in `order` of the block that may start
    bool stop = false;

    auto worker = [&](unsigned linear) {
        ThreadState state;
        state.linear = linear;
        state.warp = linear / 32;
        state.lane = linear % 32;
        self = &state;
        const Enlisted enlisted(linear, state);
        threadIdx = {linear % blockDim.x, (linear / blockDim.x) % blockDim.y, linear / (blockDim.x * blockDim.y)};
        for (uint64_t position = 0; position < order.size(); ++position) {
            {
                std::unique_lock<std::mutex> lock(start_mutex);
                started.wait(lock, [&] { return stop || current == position + 1; });
                if (stop) return;
            }
            const uint64_t b = order[position];
            blockIdx = {static_cast<unsigned>(b % grid[0]), static_cast<unsigned>((b / grid[0]) % grid[1]),
                        static_cast<unsigned>(b / (static_cast<uint64_t>(grid[0]) * grid[1]))};
            state.uncommitted.clear();
            state.groups.clear();
            try {
                const Failure access = run_kernel(entry, args);
                if (access.failed()) monitor.fail_access(access);
            } catch (const Abort&) {
            } catch (const std::exception& error) {
                try {
                    monitor.fail_here(format("the kernel threw: %s", error.what()));
                } catch (const Abort&) {
                }
            }
            disarm();
            monitor.thread_exited();
        }
    };

    std::vector<std::thread> workers;
    workers.reserve(threads);
    Failure failure;
    try {
        for (unsigned t = 0; t < threads; ++t) workers.emplace_back(worker, t);
    } catch (const std::system_error& error) {
        failure = Failure::of(KDA_EMU_FAULT_EMULATOR,
                              format("the emulator could not start %u threads: %s", threads, error.what()));
    }
    for (uint64_t position = 0; !failure.failed() && position < order.size(); ++position) {
        fill_static_shared();
        if (dynamic.size > 0) memset(dynamic.bytes, 0xff, dynamic.size);
        monitor.reset(threads);
        {
            std::lock_guard<std::mutex> lock(start_mutex);
            current = position + 1;
        }
        started.notify_all();
        failure = monitor.wait_block();
        if (!failure.failed()) {
            const uint64_t b = order[position];
            failure = memory.check({static_cast<unsigned>(b % grid[0]), static_cast<unsigned>((b / grid[0]) % grid[1]),
                                    static_cast<unsigned>(b / (static_cast<uint64_t>(grid[0]) * grid[1]))});
        }
        if (failure.failed())
            failure.message += format(" (block %llu of %zu in the order of seed 0x%016llx)",
                              static_cast<unsigned long long>(position + 1), order.size(),
                              static_cast<unsigned long long>(seed));
    }
    {
        std::lock_guard<std::mutex> lock(start_mutex);
        stop = true;
    }
    started.notify_all();
    for (std::thread& worker_thread : workers) worker_thread.join();
    return failure;
}

// Copies `text` into `out` of `capacity` bytes, cut to fit and NUL-terminated.
void copy_text(const std::string& text, char* out, size_t capacity) {
    if (capacity == 0) return;
    const size_t n = std::min(text.size(), capacity - 1);
    memcpy(out, text.data(), n);
    out[n] = '\0';
}

// Reports `failure` in `fault`, its message after `prefix`.
void fill_fault(const Failure& failure, const std::string& prefix, kda_emu_fault* fault) {
    *fault = kda_emu_fault{};
    fault->kind = failure.kind;
    fault->has_thread = failure.has_thread;
    const uint3 block = failure.block, thread = failure.thread;
    const unsigned blocks[3] = {block.x, block.y, block.z}, threads[3] = {thread.x, thread.y, thread.z};
    memcpy(fault->block, blocks, sizeof blocks);
    memcpy(fault->thread, threads, sizeof threads);
    fault->parameter = failure.parameter;
    copy_text(failure.variable, fault->variable, sizeof fault->variable);
    fault->index = failure.index;
    copy_text(prefix + failure.message, fault->message, sizeof fault->message);
}

#ifdef KDA_EMU_CHECKED
// UBSan's record of an index out of an array's bounds (-fsanitize=bounds, GCC's and Clang's).
struct SourceLocation {
    const char* file;
    unsigned line, column;
};
struct TypeDescriptor {
    unsigned short kind, info;
    char name[1];
};
struct OutOfBoundsData {
    SourceLocation location;
    const TypeDescriptor* array_type;
    const TypeDescriptor* index_type;
};

// The index as UBSan passes it: an integer (kind 0) up to 64 bits in the handle itself, a wider one
// through it (its low 64 bits first); `info` is log2 of its width in bits shifted left once, the
// low bit set for a signed type.
long long index_value(const TypeDescriptor& type, uintptr_t handle) {
    if (type.kind != 0) return static_cast<long long>(handle);
    const unsigned width = 1u << (type.info >> 1);
    if (width > 64) {
        uint64_t low;
        memcpy(&low, reinterpret_cast<const void*>(handle), sizeof low);
        return static_cast<long long>(low);
    }
    if (width == 64) return static_cast<long long>(handle);
    const uint64_t mask = (uint64_t{1} << width) - 1, value = handle & mask;
    const bool negative = (type.info & 1) && (value >> (width - 1)) != 0;
    return static_cast<long long>(negative ? value | ~mask : value);
}

// An index out of an array's bounds in the kernel: the thread leaves the kernel as it does from a
// guard page. Only the module's unit is instrumented, so this runs in a kernel, armed.
void bounds_fault(const void* data, const void* index) {
    if (self == nullptr || !self->armed) return;
    const auto* bounds = static_cast<const OutOfBoundsData*>(data);
    self->fault = AccessFault{};
    self->fault.file = bounds->location.file;
    self->fault.line = bounds->location.line;
    self->fault.column = bounds->location.column;
    self->fault.array_type = bounds->array_type->name;
    self->fault.index = index_value(*bounds->index_type, reinterpret_cast<uintptr_t>(index));
    siglongjmp(self->jump, 1);
}

// An access of the kernel, as its unit's instrumentation reports it before it happens (compiled
// with -fsanitize=kernel-address, every check a call, whose handlers are below): one in the
// launch's mapping but outside every region's bytes leaves the kernel as a guard page's fault
// does, but for any distance within the mapping, either side, and telling a read from a write.
// An access outside the mapping (the thread's stack, static shared memory, the runtime's own
// memory) is not to the launch's views or dynamic shared memory.
void check_access(uintptr_t address, size_t size, bool write) {
    if (address + size <= guarded_begin.load(std::memory_order_relaxed) ||
        address >= guarded_end.load(std::memory_order_relaxed) || self == nullptr || !self->armed)
        return;
    for (const Region& region : *live_regions) {
        const uintptr_t begin = reinterpret_cast<uintptr_t>(region.begin);
        if (address >= begin && address + size <= begin + region.bytes) return;
    }
    // The first byte outside: the access's own, or the region's end that it straddles.
    const Region* region = region_nearest(address);
    const uintptr_t end = reinterpret_cast<uintptr_t>(region->begin) + region->bytes;
    self->fault = AccessFault{};
    self->fault.region = region;
    self->fault.address = address < end && address + size > end ? end : address;
    self->fault.write = write ? 1 : 0;
    siglongjmp(self->jump, 1);
}

// The array an index expression ending at `column` (its closing bracket) of `line` of `file`
// indexes: the name before its subscripts (`tile` of `tile[r][c]`), or "" where the source cannot
// be read or the expression is not a name and subscripts.
std::string array_name(const char* file, unsigned line, unsigned column) {
    FILE* source = file ? fopen(file, "r") : nullptr;
    if (!source) return "";
    std::string text;
    char buffer[1024];
    for (unsigned at = 1; at <= line && fgets(buffer, sizeof buffer, source);) {
        if (at == line) text += buffer;
        if (strchr(buffer, '\n')) ++at;  // a longer line comes in pieces
    }
    fclose(source);
    if (column == 0 || column > text.size()) return "";
    size_t i = column - 1;
    const auto is_name = [](char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    // Back over each subscript, from its `]` to its `[`, then over blanks.
    while (text[i] == ']') {
        for (int depth = 0;; --i) {
            depth += text[i] == ']' ? 1 : text[i] == '[' ? -1 : 0;
            if (depth == 0) break;
            if (i == 0) return "";
        }
        do {
            if (i == 0) return "";
            --i;
        } while (isspace(static_cast<unsigned char>(text[i])));
    }
    const size_t end = i + 1;
    while (i > 0 && is_name(text[i - 1])) --i;
    if (i == end || !is_name(text[i]) || isdigit(static_cast<unsigned char>(text[i]))) return "";
    return text.substr(i, end - i);
}

// The names and meanings of the si_codes a kernel's fault may carry (signal.h), for its message.
struct FaultCode {
    int signal, code;
    const char* name;
    const char* meaning;
};
constexpr FaultCode kFaultCodes[] = {
    // x86 raises one divide error for both, which the kernel reports as FPE_INTDIV.
    {SIGFPE, FPE_INTDIV, "FPE_INTDIV", "integer division by zero (or of the least signed integer by -1)"},
    {SIGFPE, FPE_INTOVF, "FPE_INTOVF", "integer overflow"},
    {SIGFPE, FPE_FLTDIV, "FPE_FLTDIV", "floating-point division by zero"},
    {SIGFPE, FPE_FLTOVF, "FPE_FLTOVF", "floating-point overflow"},
    {SIGFPE, FPE_FLTUND, "FPE_FLTUND", "floating-point underflow"},
    {SIGFPE, FPE_FLTRES, "FPE_FLTRES", "an inexact floating-point result"},
    {SIGFPE, FPE_FLTINV, "FPE_FLTINV", "an invalid floating-point operation"},
    {SIGFPE, FPE_FLTSUB, "FPE_FLTSUB", "a subscript out of range"},
    {SIGSEGV, SEGV_MAPERR, "SEGV_MAPERR", "nothing is mapped there"},
    {SIGSEGV, SEGV_ACCERR, "SEGV_ACCERR", "its pages' protection refuses the access"},
    // A general-protection or stack-segment fault: the processor refused the access before any
    // page was looked up, and gives no address. The stack segment's is an access through a base
    // register it takes for the stack's (rsp, rbp), which GCC also uses for any pointer.
    {SIGSEGV, SI_KERNEL, "a general-protection fault",
     "an address outside the address space, as a pointer far off its memory makes, or a misaligned vector access"},
    {SIGBUS, SI_KERNEL, "a stack-segment fault",
     "an address outside the address space, as a pointer far off its memory makes"},
    {SIGBUS, BUS_ADRALN, "BUS_ADRALN", "a misaligned address"},
    {SIGBUS, BUS_ADRERR, "BUS_ADRERR", "an address no memory backs (a file's mapping past its end)"},
    {SIGBUS, BUS_OBJERR, "BUS_OBJERR", "a hardware error"},
    {SIGILL, ILL_ILLOPC, "ILL_ILLOPC", "an illegal opcode"},
    {SIGILL, ILL_ILLOPN, "ILL_ILLOPN", "an illegal operand"},
    {SIGILL, ILL_ILLADR, "ILL_ILLADR", "an illegal addressing mode"},
    {SIGILL, ILL_ILLTRP, "ILL_ILLTRP", "an illegal trap"},
    {SIGILL, ILL_PRVOPC, "ILL_PRVOPC", "a privileged opcode"},
    {SIGILL, ILL_PRVREG, "ILL_PRVREG", "a privileged register"},
    {SIGILL, ILL_COPROC, "ILL_COPROC", "a coprocessor error"},
    {SIGILL, ILL_BADSTK, "ILL_BADSTK", "an internal stack error"},
};

// The failure of a kernel that raised `fault`'s signal outside the guard pages, named by the
// signal and its code, with the address where the fault has one.
Failure signal_failure(const AccessFault& fault) {
    const FaultCode* known = nullptr;
    for (const FaultCode& code : kFaultCodes)
        if (code.signal == fault.signal && code.code == fault.code) known = &code;
    const unsigned long long address = fault.address;
    // "(SIGBUS, BUS_ADRALN: a misaligned address)", or the code's number where it is not known.
    const auto code = [&](const char* signal) {
        return known ? format("(%s, %s: %s)", signal, known->name, known->meaning)
                     : format("(%s, si_code %d)", signal, fault.code);
    };
    if (known && fault.code == SI_KERNEL)
        return Failure::of(KDA_EMU_FAULT_KERNEL,
                           format("a memory access the processor refused without giving its address %s",
                                  code(fault.signal == SIGBUS ? "SIGBUS" : "SIGSEGV").c_str()));
    std::string message;
    switch (fault.signal) {
        case SIGFPE:
            // The exception first: "integer division by zero (SIGFPE, FPE_INTDIV)".
            message = known ? format("%s (SIGFPE, %s)", known->meaning, known->name)
                            : "an arithmetic exception " + code("SIGFPE");
            break;
        case SIGILL:
            message = "an illegal instruction " + code("SIGILL") +
                      ": a trap, as __builtin_trap compiles to and the compiler puts on a path it proves undefined "
                      "(a null pointer's dereference among them)";
            break;
        case SIGBUS:
            message = format("a bus error at address 0x%llx %s", address, code("SIGBUS").c_str());
            break;
        default: {  // SIGSEGV
            const char* access = fault.write == 1 ? "a write of" : fault.write == 0 ? "a read of" : "an access to";
            // The first page is never mapped: an address in it is a null pointer's, or near one.
            const char* null = address < page_size ? " (through a null pointer)" : "";
            message = format("%s address 0x%llx%s, outside the launch's memory %s", access, address, null,
                             code("SIGSEGV").c_str());
        }
    }
    return Failure::of(KDA_EMU_FAULT_KERNEL, message);
}

Failure access_failure(const AccessFault& fault) {
    if (!fault.region && fault.signal != 0) return signal_failure(fault);
    Failure failure = Failure::of(KDA_EMU_FAULT_OUT_OF_BOUNDS, "");
    if (fault.region) {
        const Region& region = *fault.region;
        const char* access = fault.write == 1 ? "a write" : fault.write == 0 ? "a read" : "an access";
        failure.index = element_index(region, fault.address);
        if (region.parameter >= 0) {
            failure.parameter = region.parameter;
            failure.message = format("%s of element %lld of parameter %d, outside its %zu elements", access,
                                     failure.index, region.parameter, region.bytes / region.element_size);
        } else {
            failure.variable = "dynamic shared memory";
            failure.message = format("%s of byte %lld of the launch's dynamic shared memory, outside its %zu bytes",
                                     access, failure.index, region.bytes);
        }
        return failure;
    }
    // The compiler quotes the type: 'float [128]'.
    std::string type = fault.array_type ? fault.array_type : "";
    if (type.size() >= 2 && type.front() == '\'' && type.back() == '\'') type = type.substr(1, type.size() - 2);
    const std::string name = array_name(fault.file, fault.line, fault.column);
    failure.variable = name.empty() ? type : name;
    failure.index = fault.index;
    const std::string array = name.empty() ? "an array of type " + type : "`" + name + "` (" + type + ")";
    failure.message = format("index %lld out of bounds for %s at %s:%u:%u", fault.index, array.c_str(),
                             fault.file ? fault.file : "?", fault.line, fault.column);
    return failure;
}
#endif

}  // namespace

void register_entry(const char* name, Invoker invoke, unsigned arity, const char* const* param_types,
                    const ParamLayout* layouts) {
    std::string params;
    for (unsigned i = 0; i < arity; ++i) params += (i ? "," : "") + std::string(param_types[i]);
    if (registry().size() < kMaxEntries)
        registry().push_back({name, invoke, arity, params, std::vector<ParamLayout>(layouts, layouts + arity)});
}

void syncthreads() { monitor.barrier(); }

uint64_t exchange(const char* op, unsigned mask, uint64_t value, int source) {
    return monitor.exchange(op, mask, value, source, false);
}

void syncwarp(unsigned mask) { monitor.exchange("__syncwarp", mask, 0, -1, true); }

unsigned ballot(const char* op, unsigned mask, bool predicate) {
    return static_cast<unsigned>(monitor.exchange(op, mask, predicate ? 1 : 0, kBallot, false));
}

unsigned active_lanes() { return monitor.active_lanes(); }

bool in_shared_memory(const void* address, size_t bytes) {
    return in_shared(reinterpret_cast<uintptr_t>(address), bytes);
}

unsigned lane() { return self->lane; }

void cp_async(void* dst, const void* src, unsigned bytes) {
#ifdef KDA_EMU_CHECKED
    // The copy is the runtime's, which no instrumentation checks: its source and destination are
    // the kernel's accesses, checked as its own loads and stores are.
    check_access(reinterpret_cast<uintptr_t>(src), bytes, false);
    check_access(reinterpret_cast<uintptr_t>(dst), bytes, true);
#endif
    if (bytes != 4 && bytes != 8 && bytes != 16)
        monitor.fail_here(format("cp.async of %u bytes from %p to %p: it copies 4, 8 or 16", bytes, src, dst));
    const uintptr_t misaligned = (reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % bytes;
    if (misaligned != 0)
        monitor.fail_here(format("cp.async of %u bytes from %p to %p: both must be aligned to the size", bytes, src, dst));
    PendingCopy copy;
    copy.dst = dst;
    copy.size = bytes;
    memcpy(copy.bytes, src, bytes);
    // Until its wait, the destination reads as NaN bytes: a read before the wait is visible.
    memset(dst, 0xff, bytes);
    self->uncommitted.push_back(copy);
}

void cp_async_commit() {
    self->groups.push_back(std::move(self->uncommitted));
    self->uncommitted.clear();
}

void cp_async_wait(int newest_pending) {
    std::vector<std::vector<PendingCopy>>& groups = self->groups;
    const size_t keep = static_cast<size_t>(newest_pending < 0 ? 0 : newest_pending);
    if (groups.size() <= keep) return;
    const size_t land = groups.size() - keep;
    for (size_t g = 0; g < land; ++g)
        for (const PendingCopy& copy : groups[g]) memcpy(copy.dst, copy.bytes, copy.size);
    groups.erase(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(land));
}

void* dynamic_shared() { return dynamic.bytes; }
unsigned dynamic_shared_bytes() { return dynamic.size; }

void gather(const char* op, const void* record, unsigned bytes, void* all) { monitor.gather(op, record, bytes, all); }

// ldmatrix.sync.aligned.m8n8.x{count}.shared.b16, no .trans (PTX ISA, "Warp-level matrix load
// instruction: ldmatrix"): lanes 8i..8i+7 give the addresses of the 8 rows (16 bytes each) of
// matrix i; r[i] of lane l gets row l/4 of matrix i, its 32-bit word l%4 (elements 2(l%4) and
// 2(l%4)+1, the lower-indexed one in the low half). Lanes 8*count.. give no address.
//
// Each lane that gives an address reads its own row when it arrives (so a sanitizer sees the read
// as that thread's), and the rows are then gathered: a row another lane writes after its own
// ldmatrix is never read by this one, as on the GPU where the warp's reads are done when it goes
// on. A row must be 16-byte aligned and in the block's shared memory: its static __shared__
// storage or the launch's dynamic shared memory.
void ldmatrix(unsigned count, uint32_t* r, const void* row) {
    static const char* const ops[] = {"ldmatrix.sync.aligned.m8n8.x1.shared.b16",
                                      "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
                                      "ldmatrix.sync.aligned.m8n8.x4.shared.b16"};
    if (count != 1 && count != 2 && count != 4)
        monitor.fail_here(format("ldmatrix of %u matrices: it loads 1, 2 or 4", count));
    const char* op = ops[count == 1 ? 0 : count == 2 ? 1 : 2];
    unsigned char mine[16];
    memset(mine, 0xff, sizeof mine);
    if (self->lane < 8 * count) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(row);
        if (at % 16 != 0)
            monitor.fail_here(format("%s from %p (lane %u's row of matrix %u): a row address must be aligned to "
                                     "16 bytes",
                                     op, row, self->lane, self->lane / 8));
        if (!in_shared(at, 16))
            monitor.fail_here(format("%s from %p (lane %u's row of matrix %u): the 16-byte row is not in shared "
                                     "memory (the block's %zu static bytes at %p, %u dynamic at %p)",
                                     op, row, self->lane, self->lane / 8, static_shared_bytes(),
                                     static_cast<void*>(__start_kda_emu_shared), dynamic.size,
                                     static_cast<void*>(dynamic.bytes)));
        memcpy(mine, row, sizeof mine);
    }
    unsigned char rows[32][16];
    monitor.gather(op, mine, sizeof mine, rows);
    const unsigned lane = self->lane;
    for (unsigned i = 0; i < count; ++i) memcpy(&r[i], &rows[8 * i + lane / 4][4 * (lane % 4)], 4);
}

// The accumulators of the calling lane of an m16n8 mma, g = lane/4, t = lane%4: d[0] = D[g][2t],
// d[1] = D[g][2t+1], d[2] = D[g+8][2t], d[3] = D[g+8][2t+1], each plus Σ_k A[m][k]·B[k][n] with
// every product exact in f32 for the operand types the mmas take (see each) and added one at a
// time, k ascending, each sum rounded to f32.
template <unsigned K>
void accumulate_tile(float d[4], const float (&A)[16][K], const float (&B)[K][8]) {
    const unsigned g = self->lane / 4, t = self->lane % 4;
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned m = g + (i < 2 ? 0 : 8), n = 2 * t + (i & 1);
        float acc = d[i];
        for (unsigned k = 0; k < K; ++k) {
            const float product = A[m][k] * B[k][n];
            acc = acc + product;
        }
        d[i] = acc;
    }
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 with c = d (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"), g = lane/4, t = lane%4, two bf16 a word, the
// lower-indexed element in the low half:
//   a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1], a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9];
//   b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g];
//   d[0] = D[g][2t], d[1] = D[g][2t+1], d[2] = D[g+8][2t], d[3] = D[g+8][2t+1].
// The order, which the emulator defines and a tensor core need not follow (it may add the products
// in another order or with other intermediate precision, which the ABI's tolerances allow): each
// product A[m][k]·B[k][n] is exact in f32 (8-bit by 8-bit significands; barring underflow or
// overflow of f32's range), and the 16 are added one at a time, k = 0, 1, ..., 15, each sum rounded
// to f32, onto d's old value: d = ((d + p0) + p1) + ... + p15.
void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    uint32_t all[32][6];
    monitor.gather("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", mine, sizeof mine, all);
    // The whole A (16 x 16) and B (16 x 8), widened exactly from the lanes' fragments.
    float A[16][16], B[16][8];
    for (unsigned l = 0; l < 32; ++l) {
        const unsigned g = l / 4, t = l % 4;
        const uint32_t* w = all[l];
        for (unsigned e = 0; e < 2; ++e) {
            const unsigned shift = 16 * (1 - e);  // element e: the low half first
            A[g][2 * t + e] = bits_to_float((w[0] << shift) & 0xffff0000u);
            A[g + 8][2 * t + e] = bits_to_float((w[1] << shift) & 0xffff0000u);
            A[g][2 * t + 8 + e] = bits_to_float((w[2] << shift) & 0xffff0000u);
            A[g + 8][2 * t + 8 + e] = bits_to_float((w[3] << shift) & 0xffff0000u);
            B[2 * t + e][g] = bits_to_float((w[4] << shift) & 0xffff0000u);
            B[2 * t + 8 + e][g] = bits_to_float((w[5] << shift) & 0xffff0000u);
        }
    }
    accumulate_tile(d, A, B);
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 with c = d (PTX ISA, "Matrix Fragments for
// mma.m16n8k8", .tf32), g = lane/4, t = lane%4, one element a register:
//   a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4];
//   b[0] = B[t][g], b[1] = B[t+4][g];
//   d[0] = D[g][2t], d[1] = D[g][2t+1], d[2] = D[g+8][2t], d[3] = D[g+8][2t+1].
// An operand is read as the tensor core reads a .tf32 register: sign, exponent and the 10 upper
// significand bits, its 13 low bits ignored (a kernel rounds with cvt.rna.tf32.f32 first). The
// order, the emulator's own as for the bf16 mma: each product is exact in f32 (11-bit by 11-bit
// significands, barring underflow or overflow), and the 8 are added one at a time, k = 0 .. 7, each
// sum rounded to f32, onto d's old value.
void mma_tf32_1688(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    uint32_t all[32][6];
    monitor.gather("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", mine, sizeof mine, all);
    const auto tf32 = [](uint32_t bits) { return bits_to_float(bits & 0xffffe000u); };
    float A[16][8], B[8][8];
    for (unsigned l = 0; l < 32; ++l) {
        const unsigned g = l / 4, t = l % 4;
        const uint32_t* w = all[l];
        A[g][t] = tf32(w[0]);
        A[g + 8][t] = tf32(w[1]);
        A[g][t + 4] = tf32(w[2]);
        A[g + 8][t + 4] = tf32(w[3]);
        B[t][g] = tf32(w[4]);
        B[t + 4][g] = tf32(w[5]);
    }
    accumulate_tile(d, A, B);
}

}  // namespace kda_emu

using kda_emu::registry;

namespace kda_emu {
namespace {
int launch_checked(int entry, void* const* args, const unsigned long long* sizes, unsigned arg_count,
                   const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared, unsigned long long seed,
                   kda_emu_fault* fault);
}  // namespace
}  // namespace kda_emu

extern "C" {

KDA_EMU_API unsigned kda_emu_abi_version(void) { return KDA_EMU_ABI_VERSION; }

KDA_EMU_API int kda_emu_find(const char* name) {
    for (size_t i = 0; i < registry().size(); ++i)
        if (strcmp(registry()[i].name, name) == 0) return static_cast<int>(i);
    return -1;
}

KDA_EMU_API const char* kda_emu_params(int entry) {
    if (entry < 0 || static_cast<size_t>(entry) >= registry().size()) return nullptr;
    return registry()[static_cast<size_t>(entry)].params.c_str();
}

KDA_EMU_API unsigned long long kda_emu_static_shared_bytes(void) { return kda_emu::static_shared_bytes(); }

KDA_EMU_API unsigned long long kda_emu_fault_size(void) { return sizeof(kda_emu_fault); }

KDA_EMU_API int kda_emu_launch(int entry, void* const* args, const unsigned long long* sizes, unsigned arg_count,
                               const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared,
                               unsigned long long seed, kda_emu_fault* fault) {
    using namespace kda_emu;
    try {
        return launch_checked(entry, args, sizes, arg_count, grid, block, dynamic_shared, seed, fault);
    } catch (const std::exception& error) {
        fill_fault(Failure::of(KDA_EMU_FAULT_EMULATOR, format("the emulator failed: %s", error.what())), "", fault);
        return 1;
    }
}

#ifdef KDA_EMU_CHECKED
// UBSan's handlers of -fsanitize=bounds, with which the toolchain compiles a module's unit where no
// sanitizer is: defined here, so no UBSan runtime is needed (under AddressSanitizer + UBSan the
// sanitizer's runtime defines them, and this build has none). Hidden, as everything of the
// runtime but its ABI: each library's own.
void __ubsan_handle_out_of_bounds(void* data, void* index) { kda_emu::bounds_fault(data, index); }
void __ubsan_handle_out_of_bounds_abort(void* data, void* index) {
    kda_emu::bounds_fault(data, index);
    abort();
}

// The access checks of -fsanitize=kernel-address (KASAN's ABI, which needs no sanitizer runtime),
// with which the toolchain compiles a module's unit where no sanitizer is; hidden, as the bounds
// handlers. The instrumentation also marks each call that does not return (a throw), for a
// runtime that tracks stacks, and brackets the unit's dynamic initializers, for one that checks
// their order: nothing to do here.
#define KDA_EMU_ACCESS_CHECKS(size)                                                                      \
    void __asan_load##size##_noabort(uintptr_t address) { kda_emu::check_access(address, size, false); } \
    void __asan_store##size##_noabort(uintptr_t address) { kda_emu::check_access(address, size, true); }
KDA_EMU_ACCESS_CHECKS(1)
KDA_EMU_ACCESS_CHECKS(2)
KDA_EMU_ACCESS_CHECKS(4)
KDA_EMU_ACCESS_CHECKS(8)
KDA_EMU_ACCESS_CHECKS(16)
#undef KDA_EMU_ACCESS_CHECKS
void __asan_loadN_noabort(uintptr_t address, size_t size) { kda_emu::check_access(address, size, false); }
void __asan_storeN_noabort(uintptr_t address, size_t size) { kda_emu::check_access(address, size, true); }
void __asan_handle_no_return(void) {}
void __asan_before_dynamic_init(const char*) {}
void __asan_after_dynamic_init(void) {}
#endif

}  // extern "C"

namespace kda_emu {
namespace {
int launch_checked(int entry, void* const* args, const unsigned long long* sizes, unsigned arg_count,
                   const unsigned grid[3], const unsigned block[3], unsigned dynamic_shared, unsigned long long seed,
                   kda_emu_fault* fault) {
    if (entry < 0 || static_cast<size_t>(entry) >= registry().size()) {
        fill_fault(Failure::of(KDA_EMU_FAULT_REFUSED, format("no entry %d in this module", entry)), "", fault);
        return 1;
    }
    const RegisteredEntry& registered = registry()[static_cast<size_t>(entry)];
    Failure failure;
    if (arg_count != registered.arity) {
        failure = Failure::of(KDA_EMU_FAULT_REFUSED, format("%u arguments for %u parameters", arg_count, registered.arity));
    } else if (sizes == nullptr && arg_count > 0) {
        failure = Failure::of(KDA_EMU_FAULT_REFUSED, "no view sizes for the arguments");
    } else if (std::string problem = geometry_problem(grid, block, dynamic_shared); !problem.empty()) {
        failure = Failure::of(KDA_EMU_FAULT_REFUSED, std::move(problem));
    }
    if (!failure.failed()) {
        std::lock_guard<std::mutex> lock(launch_mutex);
        blockDim = {block[0], block[1], block[2]};
        gridDim = {grid[0], grid[1], grid[2]};
        LaunchMemory memory;
        const std::string problem = memory.prepare(registered.layouts, args, sizes, dynamic_shared);
        if (!problem.empty()) {
            failure = Failure::of(KDA_EMU_FAULT_EMULATOR, "the emulator could not " + problem);
        } else {
            failure = run_blocks(registered, memory, grid, seed);
            memory.copy_back();
        }
    }
    if (!failure.failed()) return 0;
    fill_fault(failure, std::string(registered.name) + ": ", fault);
    return 1;
}
}  // namespace
}  // namespace kda_emu
