// y = a * x + y, one work-item per element.
__kernel void saxpy(__global const float* x, __global float* y, float a, long n) {
  long i = get_global_id(0);
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}
