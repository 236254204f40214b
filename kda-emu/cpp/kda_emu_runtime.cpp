// The host side of kda's CUDA emulator, compiled into every emulated module: the entry registry,
// the block scheduler, barriers, warp exchanges and gathers, cp.async, the tensor-core ldmatrix
// and mmas (bf16 and tf32), and the C ABI the Rust backend and the sanitizer driver call (kda_emu_abi.h).
//
// A launch runs its blocks one at a time in an order shuffled by its seed, each block on one OS
// thread per CUDA thread. Every wait (barrier, exchange, gather) goes through one monitor per block
// that knows which threads run, wait or have returned, so a barrier some thread never reaches, a
// warp collective (shuffle, ldmatrix, mma) with lanes missing or a deadlock ends the launch with a
// message instead of a hang: the monitor sets the failure and every waiting thread unwinds out of
// the kernel (Abort).
//
// Under ThreadSanitizer the monitor's own mutex would order every thread that waits after every
// thread that waited before it, whatever they waited for, and hide a missing barrier behind any
// other wait. So the monitor's locking and its own state are invisible to TSan, and it declares the
// order CUDA gives instead: a __syncthreads orders the block's threads, a __syncwarp its mask's
// lanes, and nothing else does (shuffles, ldmatrix and mma exchange values, not memory order).
#include <condition_variable>
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

// The module's __shared__ variables, between the linker's bounds of their section (weak: a module
// without shared memory has no section).
extern "C" {
extern char __start_kda_emu_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_kda_emu_shared[] __attribute__((weak, visibility("hidden")));
}

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
};

// Function-local statics: registrars run at load time, in any order across translation units.
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

// One CUDA thread's identity and its asynchronous copies.
struct ThreadState {
    unsigned linear = 0, warp = 0, lane = 0;
    std::vector<PendingCopy> uncommitted;
    std::vector<std::vector<PendingCopy>> groups;  // committed, oldest first
};
thread_local ThreadState* self = nullptr;

// The most bytes one lane deposits in a gather (kda_emu::gather).
constexpr unsigned kMaxGatherRecord = 32;

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
    uint64_t exchange(const char* op, unsigned mask, uint64_t value, int source, bool orders_memory) {
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
            for (unsigned i = 0; i < 32; ++i)
                if (mask & (1u << i))
                    warp.results[i] = warp.sources[i] < 0 ? warp.values[i] : warp.values[warp.sources[i]];
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

    // Called by a thread that did not raise the failure itself but saw something fail.
    void fail_here(std::string message) {
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

    void record(std::string message) {
        if (failed_) return;
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

// The running launch's dynamic shared memory (null and 0 when it asked for none).
struct DynamicShared {
    unsigned char* bytes = nullptr;
    unsigned size = 0;
} dynamic;

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

// Whether the 16 bytes at `at` lie in the block's shared memory, static or dynamic.
bool in_shared(uintptr_t at) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(__start_kda_emu_shared);
    const uintptr_t dynamic_begin = reinterpret_cast<uintptr_t>(dynamic.bytes);
    return (static_shared_bytes() > 0 && at >= begin && at + 16 <= begin + static_shared_bytes()) ||
           (dynamic.size > 0 && at >= dynamic_begin && at + 16 <= dynamic_begin + dynamic.size);
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

// Runs every block of the launch on `threads` workers; the failure, if any.
Failure run_blocks(const RegisteredEntry& entry, void* const* args, const unsigned grid[3], uint64_t seed) {
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
                entry.invoke(args);
            } catch (const Abort&) {
            } catch (const std::exception& error) {
                try {
                    monitor.fail_here(format("the kernel threw: %s", error.what()));
                } catch (const Abort&) {
                }
            }
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
    fault->parameter = -1;
    copy_text(prefix + failure.message, fault->message, sizeof fault->message);
}

}  // namespace

Registrar::Registrar(const char* name, Invoker invoke, unsigned arity, const char* const* param_types) {
    std::string params;
    for (unsigned i = 0; i < arity; ++i) params += (i ? "," : "") + std::string(param_types[i]);
    if (registry().size() < kMaxEntries) registry().push_back({name, invoke, arity, params});
}

void syncthreads() { monitor.barrier(); }

uint64_t exchange(const char* op, unsigned mask, uint64_t value, int source) {
    return monitor.exchange(op, mask, value, source, false);
}

void syncwarp(unsigned mask) { monitor.exchange("__syncwarp", mask, 0, -1, true); }

unsigned lane() { return self->lane; }

void cp_async(void* dst, const void* src, unsigned bytes) {
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
        if (!in_shared(at))
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
int launch_checked(int entry, void* const* args, unsigned arg_count, const unsigned grid[3], const unsigned block[3],
                   unsigned dynamic_shared, unsigned long long seed, kda_emu_fault* fault);
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

KDA_EMU_API int kda_emu_launch(int entry, void* const* args, unsigned arg_count, const unsigned grid[3],
                               const unsigned block[3], unsigned dynamic_shared, unsigned long long seed,
                               kda_emu_fault* fault) {
    using namespace kda_emu;
    try {
        return launch_checked(entry, args, arg_count, grid, block, dynamic_shared, seed, fault);
    } catch (const std::exception& error) {
        fill_fault(Failure::of(KDA_EMU_FAULT_EMULATOR, format("the emulator failed: %s", error.what())), "", fault);
        return 1;
    }
}

}  // extern "C"

namespace kda_emu {
namespace {
int launch_checked(int entry, void* const* args, unsigned arg_count, const unsigned grid[3], const unsigned block[3],
                   unsigned dynamic_shared, unsigned long long seed, kda_emu_fault* fault) {
    if (entry < 0 || static_cast<size_t>(entry) >= registry().size()) {
        fill_fault(Failure::of(KDA_EMU_FAULT_REFUSED, format("no entry %d in this module", entry)), "", fault);
        return 1;
    }
    const RegisteredEntry& registered = registry()[static_cast<size_t>(entry)];
    Failure failure;
    if (arg_count != registered.arity) {
        failure = Failure::of(KDA_EMU_FAULT_REFUSED, format("%u arguments for %u parameters", arg_count, registered.arity));
    } else if (std::string problem = geometry_problem(grid, block, dynamic_shared); !problem.empty()) {
        failure = Failure::of(KDA_EMU_FAULT_REFUSED, std::move(problem));
    }
    if (!failure.failed()) {
        std::lock_guard<std::mutex> lock(launch_mutex);
        blockDim = {block[0], block[1], block[2]};
        gridDim = {grid[0], grid[1], grid[2]};
        void* storage = nullptr;
        if (dynamic_shared > 0 && posix_memalign(&storage, kDynamicSharedAlignment, dynamic_shared) != 0) {
            failure = Failure::of(KDA_EMU_FAULT_EMULATOR,
                                  format("the emulator could not allocate %u bytes of dynamic shared memory", dynamic_shared));
        } else {
            dynamic = DynamicShared{static_cast<unsigned char*>(storage), dynamic_shared};
            failure = run_blocks(registered, args, grid, seed);
            dynamic = DynamicShared{};
            free(storage);
        }
    }
    if (!failure.failed()) return 0;
    fill_fault(failure, std::string(registered.name) + ": ", fault);
    return 1;
}
}  // namespace
}  // namespace kda_emu
