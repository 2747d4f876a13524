// Version and error text of the library, so callers can check what they loaded and report failures.
#include "common.cuh"

extern "C" int voxcpm_abi_version(void) { return VOXCPM_KERNELS_ABI_VERSION; }

extern "C" const char* voxcpm_error_string(int error) {
    return cudaGetErrorString(static_cast<cudaError_t>(error));
}
