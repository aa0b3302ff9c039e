__kernel void E_16(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2, __global const float* restrict data3) {
  int gidx0 = (int)get_global_id(0);
  float val0 = data1[gidx0];
  float val1 = data2[gidx0];
  float alu0 = (val0*val1);
  float val2 = data3[gidx0];
  float alu1 = (alu0+val2);
  float alu2 = (((alu1)!=(alu1)||(alu1)>(0x0p+0f))?(alu1):(0x0p+0f));
  data0[gidx0] = alu2;
}
