// y = a * x + y over n elements.
__kernel void saxpy(__global const float* x, __global float* y, float a, long n) {
    size_t i = get_global_id(0);
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
