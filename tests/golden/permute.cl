
/* kernel */
__kernel void E_4_6(__global float* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  int gidx1 = (int)get_global_id(1);
  float val0 = data1[((gidx0*4)+gidx1)];
  data0[((gidx1*6)+gidx0)] = val0;
}
