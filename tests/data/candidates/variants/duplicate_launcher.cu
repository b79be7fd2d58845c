// Defines kp_scale_launch a second time (kernel.cu already does): the link fails with a multiple definition.
#include <cuda_runtime.h>

extern "C" int kp_scale_launch(const float* x, float* y, float alpha, long n, cudaStream_t stream) {
    (void)x; (void)y; (void)alpha; (void)n; (void)stream;
    return 0;
}
