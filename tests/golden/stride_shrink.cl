
/* kernel */
__kernel void E_3_4(__global float* restrict data0, __global const float* restrict data1) {
  int gidx1 = (int)get_global_id(1);
  float4 val0 = vload4(0, data1+((gidx1*12)+1));
  vstore4(val0, 0, data0+(gidx1*4));
}
