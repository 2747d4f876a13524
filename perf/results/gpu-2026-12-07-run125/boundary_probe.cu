// Run 125's probe: what a kernel boundary costs in the step's chain, against waiting on a flag.
// At one stream the step is ~700 dependent kernels, most a few microseconds long; each waits for
// the whole kernel before it (griddepcontrol.wait) before it reads the activations. Here each
// block of a kernel reads all of the previous kernel's outputs (one float a block, like a GEMM
// reading every column of its input) and writes its own, so the time a kernel takes is the
// boundary. Every chain is one CUDA graph of K kernels, replayed, so the host's launch rate does
// not enter (run 122's probe launched from the host: ~3.7 us a kernel in every mode).
//   serial   plain graph order: the next kernel starts after this one ends;
//   pdl      programmatic dependent launch, griddepcontrol.wait before the reads (main's way);
//   flag     programmatic launch, no griddepcontrol.wait: each block spins on a counter that the
//            previous kernel's blocks increment after their writes (release / acquire at gpu
//            scope); a memset node zeroes the counters at the start of each replay;
//   barrier  one kernel of G blocks doing K rounds with a grid barrier between them (a
//            persistent kernel's cost for the same dependency).
// Build on the CPU machine: nvcc -O3 -std=c++17 -arch=sm_90 -o probe boundary_probe.cu
// Run: ./probe [kernels=1000] [replays=20]. Checks that every mode computes the same values.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kThreads = 256;
constexpr int kMaxGrid = 1024;

enum Mode { kSerial = 0, kPdl = 1, kFlag = 2 };

__device__ __forceinline__ int load_acquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void add_release(int* p, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ float load_relaxed(const float* p) {
    float v;
    asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];\n" : "=f"(v) : "l"(p) : "memory");
    return v;
}

// The value block b of step i writes: the sum of the previous step's values, mixed with b.
__device__ float reduce_previous(const float* previous, int grid) {
    __shared__ float partial[kThreads / 32];
    float sum = 0.f;
    for (int j = threadIdx.x; j < grid; j += kThreads) sum += load_relaxed(previous + j);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
    return total * 0.5f + static_cast<float>(blockIdx.x & 7);
}

template <int MODE>
__global__ void __launch_bounds__(kThreads) step(const float* previous, float* out, const int* ready, int* done,
                                                 int grid) {
    if (MODE != kSerial) asm volatile("griddepcontrol.launch_dependents;\n");
    if (MODE == kPdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (MODE == kFlag && ready != nullptr) {
        if (threadIdx.x == 0)
            while (load_acquire(ready) < grid) {
            }
        __syncthreads();
    }
    const float value = reduce_previous(previous, grid);
    if (threadIdx.x == 0) {
        out[blockIdx.x] = value;
        if (MODE == kFlag) add_release(done, 1);
    }
}

// K rounds of the same dependency inside one kernel, a sense-reversing grid barrier between them.
__global__ void __launch_bounds__(kThreads) persistent(float* values, int* barrier, int rounds, int grid) {
    for (int i = 0; i < rounds; ++i) {
        const float value = reduce_previous(values + static_cast<size_t>(i) * grid, grid);
        if (threadIdx.x == 0) {
            values[static_cast<size_t>(i + 1) * grid + blockIdx.x] = value;
            // arrive: the last block of this round resets the count and bumps the generation
            const int generation = load_acquire(barrier + 1);
            int arrived;
            asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(arrived) : "l"(barrier) : "memory");
            if (arrived == grid - 1) {
                atomicExch(barrier, 0);
                add_release(barrier + 1, 1);
            } else {
                while (load_acquire(barrier + 1) == generation) {
                }
            }
        }
        __syncthreads();
    }
}

template <int MODE> void launch(const float* previous, float* out, const int* ready, int* done, int grid, bool first,
                                cudaStream_t stream) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(kThreads);
    config.stream = stream;
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = MODE != kSerial && !first ? 1 : 0;
    cudaLaunchKernelEx(&config, step<MODE>, previous, out, first ? nullptr : ready, done, grid);
}

// values: (kernels + 1) x grid floats, row 0 the input; counters: kernels ints.
template <int MODE> cudaGraphExec_t capture(float* values, int* counters, int kernels, int grid, cudaStream_t stream) {
    cudaGraph_t graph;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (MODE == kFlag) cudaMemsetAsync(counters, 0, kernels * sizeof(int), stream);
    for (int i = 0; i < kernels; ++i)
        launch<MODE>(values + static_cast<size_t>(i) * grid, values + static_cast<size_t>(i + 1) * grid,
                     i > 0 ? counters + i - 1 : nullptr, counters + i, grid, i == 0, stream);
    cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = nullptr;
    cudaGraphDestroy(graph);
    return exec;
}

float replay_us(cudaGraphExec_t exec, int kernels, int replays, cudaStream_t stream) {
    for (int i = 0; i < 3; ++i) cudaGraphLaunch(exec, stream);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, stream);
    for (int i = 0; i < replays; ++i) cudaGraphLaunch(exec, stream);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, start, stop);
    return ms * 1000.f / (static_cast<float>(replays) * kernels);
}

int main(int argc, char** argv) {
    const int kernels = argc > 1 ? atoi(argv[1]) : 1000;
    const int replays = argc > 2 ? atoi(argv[2]) : 20;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    float* values;
    int* counters;
    cudaMalloc(&values, static_cast<size_t>(kernels + 1) * kMaxGrid * sizeof(float));
    cudaMalloc(&counters, (kernels + 2) * sizeof(int));
    std::vector<float> input(kMaxGrid);
    for (int j = 0; j < kMaxGrid; ++j) input[j] = static_cast<float>(j % 13) * 0.125f;
    bool all_same = true;
    for (int grid : {32, 64, sms, 2 * sms}) {
        if (grid > kMaxGrid) continue;
        const size_t last = static_cast<size_t>(kernels) * grid;
        std::vector<float> reference(grid), got(grid);
        auto run_check = [&](cudaGraphExec_t exec, const char* name) {
            cudaMemcpy(values, input.data(), grid * sizeof(float), cudaMemcpyHostToDevice);
            cudaGraphLaunch(exec, stream);
            cudaStreamSynchronize(stream);
            cudaMemcpy(got.data(), values + last, grid * sizeof(float), cudaMemcpyDeviceToHost);
            if (name == nullptr) reference = got;
            else if (got != reference) { printf("grid %d: %s DIFFERS from serial\n", grid, name); all_same = false; }
        };
        cudaGraphExec_t serial = capture<kSerial>(values, counters, kernels, grid, stream);
        cudaGraphExec_t pdl = capture<kPdl>(values, counters, kernels, grid, stream);
        cudaGraphExec_t flag = capture<kFlag>(values, counters, kernels, grid, stream);
        if (!serial || !pdl || !flag) { printf("grid %d: capture failed: %s\n", grid, cudaGetErrorString(cudaGetLastError())); return 1; }
        run_check(serial, nullptr);
        run_check(pdl, "pdl");
        run_check(flag, "flag");
        float barrier_us = -1.f;
        if (grid <= sms) {  // one block a multiprocessor: all resident, as the barrier needs
            cudaMemcpy(values, input.data(), grid * sizeof(float), cudaMemcpyHostToDevice);
            cudaMemset(counters, 0, 2 * sizeof(int));
            persistent<<<grid, kThreads, 0, stream>>>(values, counters, kernels, grid);
            cudaStreamSynchronize(stream);
            cudaMemcpy(got.data(), values + last, grid * sizeof(float), cudaMemcpyDeviceToHost);
            if (got != reference) { printf("grid %d: barrier DIFFERS from serial\n", grid); all_same = false; }
            cudaEvent_t start, stop;
            cudaEventCreate(&start);
            cudaEventCreate(&stop);
            cudaEventRecord(start, stream);
            for (int r = 0; r < replays; ++r) persistent<<<grid, kThreads, 0, stream>>>(values, counters, kernels, grid);
            cudaEventRecord(stop, stream);
            cudaEventSynchronize(stop);
            float ms = 0.f;
            cudaEventElapsedTime(&ms, start, stop);
            barrier_us = ms * 1000.f / (static_cast<float>(replays) * kernels);
        }
        if (cudaGetLastError() != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(cudaGetLastError())); return 1; }
        for (int round = 0; round < 3; ++round)
            printf("grid %4d, us a kernel over %d: serial %.2f  pdl %.2f  flag %.2f  barrier %.2f\n", grid, kernels,
                   replay_us(serial, kernels, replays, stream), replay_us(pdl, kernels, replays, stream),
                   replay_us(flag, kernels, replays, stream), barrier_us);
        cudaGraphExecDestroy(serial);
        cudaGraphExecDestroy(pdl);
        cudaGraphExecDestroy(flag);
    }
    printf("values: %s\n", all_same ? "every mode equals serial" : "MODES DIFFER");
    return all_same ? 0 : 2;
}
