
/* kernel */
__kernel void E_16(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2, __global const float* restrict data3) {
  int gidx0 = (int)get_global_id(0);
  float4 val0 = vload4(0, data1+(gidx0*4));
  float4 val1 = vload4(0, data2+(gidx0*4));
  float4 alu0 = (val0*val1);
  float4 val2 = vload4(0, data3+(gidx0*4));
  float4 alu1 = (alu0+val2);
  float4 alu2 = select(((float4)(0x0p+0f)),alu1,(alu1!=alu1)|(alu1>((float4)(0x0p+0f))));
  vstore4(alu2, 0, data0+(gidx0*4));
}
