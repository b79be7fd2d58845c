// Calls a host function that no source defines: the shared library links, but does not load.
#include <cuda_runtime.h>

extern "C" int kp_helper_never_defined(int value);

extern "C" int kp_uses_missing_helper(int value) {
    return kp_helper_never_defined(value) + 1;
}
