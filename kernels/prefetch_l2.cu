// L2 prefetch of weights: a kernel that only asks the memory system to bring byte ranges into L2.
//
// At one or two streams every GEMM of a decoder layer is a few microseconds long and streams its
// weight from HBM, while the norms and the attention between the GEMMs leave HBM idle. Prefetching
// a whole LocDiT layer's weights (35 MB, L2 holds 50 MB on the H200) as the layer starts keeps HBM
// streaming through those gaps, and the GEMMs then read from L2. The kernel reads and writes no
// data: each thread issues one bulk prefetch (Hopper's cp.async.bulk.prefetch.L2) per chunk and
// exits; the prefetches need no completion, so nothing downstream waits for them.
#include "common.cuh"

namespace voxcpm {
namespace {

constexpr int kMaxRanges = 4;
constexpr int64_t kChunkBytes = 16384;
constexpr int kThreads = 32;
constexpr int kMaxBlocks = 1024;

struct Ranges {
    const char* ptr[kMaxRanges];
    int64_t bytes[kMaxRanges];
    int64_t first_chunk[kMaxRanges + 1];  // chunk index where range i starts; [kMaxRanges] = total
};

__device__ __forceinline__ void prefetch_bytes(const char* p, int64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Address and size multiples of 16 (the launcher checks the address; a ragged tail is dropped).
    const uint32_t size = static_cast<uint32_t>(bytes & ~int64_t{15});
    if (size > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(size) : "memory");
#elif defined(__CUDA_ARCH__)
    for (int64_t offset = 0; offset < bytes; offset += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + offset));
#endif
}

__global__ void __launch_bounds__(kThreads) prefetch_l2_kernel(Ranges ranges) {
    // Touches nothing another kernel writes: the next kernel may start at once, and the wait at the
    // end only keeps "this kernel finished" meaning "everything before it finished".
    pdl_launch_dependents();
    const int64_t total = ranges.first_chunk[kMaxRanges];
    for (int64_t chunk = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; chunk < total;
         chunk += static_cast<int64_t>(gridDim.x) * kThreads) {
        int r = 0;
        while (chunk >= ranges.first_chunk[r + 1]) ++r;
        const int64_t offset = (chunk - ranges.first_chunk[r]) * kChunkBytes;
        const int64_t left = ranges.bytes[r] - offset;
        prefetch_bytes(ranges.ptr[r] + offset, left < kChunkBytes ? left : kChunkBytes);
    }
    pdl_wait();
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_prefetch_l2(const void* ptr0, int64_t bytes0, const void* ptr1, int64_t bytes1,
                                  const void* ptr2, int64_t bytes2, const void* ptr3, int64_t bytes3,
                                  void* stream) {
    using namespace voxcpm;
    const void* ptrs[kMaxRanges] = {ptr0, ptr1, ptr2, ptr3};
    const int64_t bytes[kMaxRanges] = {bytes0, bytes1, bytes2, bytes3};
    Ranges ranges{};
    int64_t chunks = 0;
    for (int i = 0; i < kMaxRanges; ++i) {
        if (bytes[i] < 0 || (bytes[i] > 0 && (ptrs[i] == nullptr || !aligned16(ptrs[i]))))
            return VOXCPM_ERROR_INVALID_ARGUMENT;
        ranges.ptr[i] = static_cast<const char*>(ptrs[i]);
        ranges.bytes[i] = bytes[i];
        ranges.first_chunk[i] = chunks;
        chunks += (bytes[i] + kChunkBytes - 1) / kChunkBytes;
    }
    ranges.first_chunk[kMaxRanges] = chunks;
    if (chunks == 0) return 0;
    const int64_t blocks = std::min<int64_t>((chunks + kThreads - 1) / kThreads, kMaxBlocks);
    return launch_kernel(prefetch_l2_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                         static_cast<cudaStream_t>(stream), ranges);
}
