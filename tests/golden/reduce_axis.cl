__kernel void r_4_6(__global float* restrict data0, __global const float* restrict data1) {
  int gidx0 = (int)get_global_id(0);
  float acc0 = 0x0p+0f;
  for (int ridx0 = 0; ridx0 < 6; ridx0++) {
    float val0 = data1[((gidx0*6)+ridx0)];
    float alu0 = (acc0+val0);
    acc0 = alu0;
  }
  data0[gidx0] = acc0;
}
