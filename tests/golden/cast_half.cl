#pragma OPENCL EXTENSION cl_khr_fp16 : enable
/* kernel */
__kernel void E_16(__global half* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  float val0 = data1[gidx0];
  half alu0 = ((half)(val0));
  half alu1 = (alu0+((half)0x1p+0f));
  data0[gidx0] = alu1;
}
