__kernel void E_4_4(__global float* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float val0 = data1[((gidx1*-4)+gidx0+12)];
  data0[((gidx1*4)+gidx0)] = val0;
}
