// cuda::std of the emulator: libcu++'s namespace, which mirrors the standard library's, as the
// host's standard library. The <cuda/std/...> headers include their standard header, then this.
#pragma once

namespace cuda {
namespace std {
using namespace ::std;
}  // namespace std
}  // namespace cuda
