// Probe kernel for run 84: lets its dependents start at once, then copies src to dst only after
// delay_ns. A GEMM captured as its programmatic dependent that reads dst before waiting for it sees
// dst's old contents; one that waits (griddepcontrol.wait, SASS ACQBULK) sees the copy.
#include <stdint.h>

extern "C" __global__ void late_copy(const uint4* src, uint4* dst, long long n16, unsigned long long delay_ns) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < delay_ns);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
