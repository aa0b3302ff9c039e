
/* kernel */
__kernel void E_4_4(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2, __global const float* restrict data3) {
  int gidx1 = (int)get_global_id(1);
  float4 val0 = vload4(0, data1+(gidx1*4));
  float4 val1 = vload4(0, data2+0);
  int4 alu0 = (val0<val1);
  float4 val2 = vload4(0, data3+(gidx1*4));
  float4 alu1 = select(((float4)((-0x1.8p+0f))),val2,alu0);
  vstore4(alu1, 0, data0+(gidx1*4));
}
