// Pushing values into a peer block's shared memory within a thread block cluster (sm_90): st.async
// stores that complete on the receiver's mbarrier, which counts the bytes it expects. Unlike a
// cluster barrier with release semantics, which sm_90 compiles to MEMBAR.ALL.GPU (a wait for every
// outstanding memory access of the thread), neither side issues a fence (perf/RESULTS.md runs
// 122-123).
// One exchange per launch: the mbarrier completes phase 0 once, when its one arrival (the receiver's
// expect_bytes) and all the bytes it announced are in.
#pragma once

#include <stdint.h>

namespace voxcpm {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The address of the same shared-memory location in cluster block `rank`.
__device__ __forceinline__ uint32_t peer_address(uint32_t address, int rank) {
    uint32_t out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(address), "r"(rank));
    return out;
}

// One thread: the mbarrier, visible to the peers' stores once every block of the cluster has passed
// cluster_sync_relaxed() after it.
__device__ __forceinline__ void exchange_init(uint64_t* barrier) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(barrier)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Every thread of every block of the cluster; orders nothing but the mbarriers' initialisation.
__device__ __forceinline__ void cluster_sync_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

// One thread of the receiver: the bytes its peers will store.
__device__ __forceinline__ void exchange_expect_bytes(uint64_t* barrier, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
                 : "memory");
}

// `value` into the peer's shared memory at `peer_slot`, counted on the peer's mbarrier at
// `peer_barrier` (both from peer_address).
__device__ __forceinline__ void exchange_send(uint32_t peer_slot, float value, uint32_t peer_barrier) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(peer_slot),
                 "f"(value), "r"(peer_barrier)
                 : "memory");
}

// Every thread of the receiver: returns once all announced bytes are in its shared memory.
__device__ __forceinline__ void exchange_wait(uint64_t* barrier) {
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p;\n"
            "  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
            "  selp.u32 %0, 1, 0, p; }\n"
            : "=r"(done)
            : "r"(shared_address(barrier))
            : "memory");
    }
}

#endif

}  // namespace voxcpm
