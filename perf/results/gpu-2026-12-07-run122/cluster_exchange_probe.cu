// Run 122's probe: what skinny_gemm's cluster reduction pays for its two cluster.sync() calls.
// Each sync's arrive has release semantics at cluster scope, which sm_90 compiles to MEMBAR.ALL.GPU
// (cuobjdump). The probe runs the exchange alone, in the shape of one stream's o_proj and down
// (32 thread block clusters of 4 blocks, 256 threads, 768 partial sums a block; each block sums its
// slice over the 4 blocks in split order), as a chain of programmatic dependent launches like the
// step's, and prints us per kernel for:
//   sync     the two cluster.sync() of skinny_gemm (pull: read the peers' shared memory);
//   relaxed  the same with relaxed arrives (no MEMBAR; not ordered by the memory model, a bound);
//   push     each block st.async-es its peers' slices into their shared memory and waits on its own
//            mbarrier (one cluster barrier at the start, before the programmatic wait);
//   none     no exchange: each block sums its own values (the floor).
// Build on the CPU machine: nvcc -O3 -std=c++17 -arch=sm_90 -o probe cluster_exchange_probe.cu
// Run: ./probe [launches=4000]. Checks that sync, relaxed and push give the same sums.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
constexpr int kSplits = 4;
constexpr int kPairs = 32;
constexpr int kValues = 768;  // 2 tiles x 3 row tiles x 4 registers x 32 lanes, as at 22 rows
constexpr int kSlice = (kValues + kSplits - 1) / kSplits;  // values a block owns

enum Mode { kSync = 0, kRelaxed = 1, kPush = 2, kNone = 3 };

__device__ __forceinline__ void arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
__device__ __forceinline__ uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint32_t remote(uint32_t addr, int rank) {
    uint32_t out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
    return out;
}

template <int MODE>
__global__ void __launch_bounds__(kThreads) exchange(const float* in, float* out) {
    __shared__ float reduced[kValues];
    __shared__ float incoming[kSplits][kSlice];
    __shared__ alignas(8) unsigned long long arrived;
    const int split = blockIdx.y;
    const int tid = threadIdx.x;
    if (MODE == kPush) {
        if (tid == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(smem(&arrived)));
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        }
        arrive_relaxed();  // every block's mbarrier exists before any peer stores into it
        cluster_wait();
    }
    asm volatile("griddepcontrol.launch_dependents;\n");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    for (int v = tid; v < kValues; v += kThreads) reduced[v] = in[(blockIdx.x * kSplits + split) * kValues + v];
    __syncthreads();

    const int v = split * kSlice + tid;  // the value this thread sums, if tid < kSlice
    float sum = 0.f;
    if (MODE == kSync || MODE == kRelaxed) {
        cg::cluster_group cluster = cg::this_cluster();
        if (MODE == kSync) cluster.sync(); else { arrive_relaxed(); cluster_wait(); }
        if (tid < kSlice && v < kValues)
            for (int s = 0; s < kSplits; ++s) sum += cluster.map_shared_rank(reduced, s)[v];
        if (MODE == kSync) cluster.sync(); else { arrive_relaxed(); cluster_wait(); }
    } else if (MODE == kPush) {
        if (tid == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                         :: "r"(smem(&arrived)), "r"((kSplits - 1) * kSlice * 4) : "memory");
        for (int s = 0; s < kSplits; ++s) {
            const int w = s * kSlice + tid;
            if (s == split || tid >= kSlice) continue;
            const float value = w < kValues ? reduced[w] : 0.f;
            asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n"
                         :: "r"(remote(smem(&incoming[split][tid]), s)), "f"(value), "r"(remote(smem(&arrived), s))
                         : "memory");
        }
        uint32_t done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
                         " selp.u32 %0, 1, 0, p; }\n" : "=r"(done) : "r"(smem(&arrived)) : "memory");
        if (tid < kSlice && v < kValues)
            for (int s = 0; s < kSplits; ++s) sum += s == split ? reduced[v] : incoming[s][tid];
    } else {
        if (tid < kSlice && v < kValues) sum = reduced[v] * kSplits;
    }
    if (tid < kSlice && v < kValues) out[blockIdx.x * kValues + v] = sum;
}

template <int MODE> void launch(const float* in, float* out, cudaStream_t stream) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(kPairs, kSplits);
    config.blockDim = dim3(kThreads);
    config.stream = stream;
    cudaLaunchAttribute attributes[2];
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = 1;
    attributes[0].val.clusterDim.y = kSplits;
    attributes[0].val.clusterDim.z = 1;
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attributes;
    config.numAttrs = 2;
    cudaLaunchKernelEx(&config, exchange<MODE>, in, out);
}

template <int MODE> float time_us(const float* in, float* out, int launches, cudaStream_t stream) {
    for (int i = 0; i < 50; ++i) launch<MODE>(in, out, stream);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, stream);
    for (int i = 0; i < launches; ++i) launch<MODE>(in, out, stream);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, start, stop);
    return ms * 1000.f / launches;
}

int main(int argc, char** argv) {
    const int launches = argc > 1 ? atoi(argv[1]) : 4000;
    const size_t n_in = static_cast<size_t>(kPairs) * kSplits * kValues, n_out = static_cast<size_t>(kPairs) * kValues;
    std::vector<float> host(n_in);
    for (size_t i = 0; i < n_in; ++i) host[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f;
    float *in, *out;
    cudaMalloc(&in, n_in * sizeof(float));
    cudaMalloc(&out, n_out * sizeof(float));
    cudaMemcpy(in, host.data(), n_in * sizeof(float), cudaMemcpyHostToDevice);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

    std::vector<float> reference(n_out), got(n_out);
    launch<kSync>(in, out, stream);
    cudaMemcpy(reference.data(), out, n_out * sizeof(float), cudaMemcpyDeviceToHost);
    bool same = true;
    for (int mode : {kRelaxed, kPush}) {
        cudaMemset(out, 0, n_out * sizeof(float));
        mode == kRelaxed ? launch<kRelaxed>(in, out, stream) : launch<kPush>(in, out, stream);
        cudaMemcpy(got.data(), out, n_out * sizeof(float), cudaMemcpyDeviceToHost);
        same = same && memcmp(got.data(), reference.data(), n_out * sizeof(float)) == 0;
    }
    if (cudaGetLastError() != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess) {
        printf("CUDA error: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    printf("sums: relaxed and push %s sync's\n", same ? "equal" : "DIFFER from");
    for (int round = 0; round < 3; ++round)
        printf("us per kernel, %d launches: sync %.2f  relaxed %.2f  push %.2f  none %.2f\n", launches,
               time_us<kSync>(in, out, launches, stream), time_us<kRelaxed>(in, out, launches, stream),
               time_us<kPush>(in, out, launches, stream), time_us<kNone>(in, out, launches, stream));
    return same ? 0 : 2;
}
