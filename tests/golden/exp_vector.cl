float4 sg_exp2_float4(float4 x) {
  #pragma OPENCL FP_CONTRACT OFF
  x = select(x, (float4)(128.0f), x > 128.0f);
  x = select(x, (float4)(-151.0f), x < -151.0f);
  float4 t = x + 0x1.8p+23f, f = x - (t - 0x1.8p+23f);
  int4 n = select((int4)(0), as_int4(t) - 0x4b400000, x == x), k = n >> 1;
  float4 p = f * 0x1.41fbbcp-13f + 0x1.5f3e54p-10f;
  p = p * f + 0x1.3b2d4cp-7f;
  p = p * f + 0x1.c6aee8p-5f;
  p = p * f + 0x1.ebfbdcp-3f;
  p = p * f + 0x1.62e43p-1f;
  p = p * f + 1.0f;
  return p * as_float4((k + 127) << 23) * as_float4((n - k + 127) << 23);
}
/* kernel */
__kernel void E_64(__global float* restrict data0, __global const float* restrict data1, __global const float* restrict data2) {
  int gidx0 = (int)get_global_id(0);
  float4 val0 = vload4(0, data1+(gidx0*4));
  float4 alu0 = (val0*((float4)(0x1.99999ap-4f)));
  float4 alu1 = (alu0*((float4)(0x1.715476p+0f)));
  float4 alu2 = sg_exp2_float4(alu1);
  float4 val1 = vload4(0, data2+(gidx0*4));
  float4 alu3 = (val1+((float4)(0x1p+0f)));
  float4 alu4 = sqrt(alu3);
  float4 alu5 = (alu2/alu4);
  vstore4(alu5, 0, data0+(gidx0*4));
}
