__kernel void E_4_4(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float val0 = data1[((gidx1*4)+gidx0)];
  float val1 = data2[gidx0];
  float alu0 = (val0+val1);
  data0[((gidx1*4)+gidx0)] = alu0;
}
