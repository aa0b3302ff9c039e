
/* kernel */
__kernel void E_n(__global float* restrict data0, __global const float* restrict data1, const int var0) {
  int gidx0 = (int)get_global_id(0);
  float val0 = data1[gidx0];
  float alu0 = (val0*0x1p+1f);
  data0[gidx0] = alu0;
}
