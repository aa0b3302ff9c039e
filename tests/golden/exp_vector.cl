
/* kernel */
__kernel void E_64(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2) {
  int gidx0 = (int)get_global_id(0);
  float4 val0 = vload4(0, data1+(gidx0*4));
  float4 alu0 = (val0*((float4)(0x1.99999ap-4f)));
  float4 alu1 = (alu0*((float4)(0x1.715476p+0f)));
  float4 alu2 = exp2(alu1);
  float4 val1 = vload4(0, data2+(gidx0*4));
  float4 alu3 = (val1+((float4)(0x1p+0f)));
  float4 alu4 = sqrt(alu3);
  float4 alu5 = (alu2/alu4);
  vstore4(alu5, 0, data0+(gidx0*4));
}
