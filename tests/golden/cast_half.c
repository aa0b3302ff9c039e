#include <math.h>

static inline float sg_h2f(unsigned short h) {
  unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  union { unsigned int u; float f; } r;
  if (e == 0) { float f = (float)m * 0x1p-24f; return s ? -f : f; }
  r.u = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  return r.f;
}
static inline unsigned short sg_f2h(float f) {
  union { float f; unsigned int u; } x = { f };
  unsigned int s = (x.u >> 16) & 0x8000u, a = x.u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u);
  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);
  if (a < 0x38800000u) {
    union { unsigned int u; float f; } y = { a };
    return (unsigned short)(s | (unsigned int)rintf(y.f * 0x1p24f));
  }
  a -= 0x38000000u;
  return (unsigned short)(s | ((a + 0xfffu + ((a >> 13) & 1u)) >> 13));
}
static inline float sg_rh(float f) { return sg_h2f(sg_f2h(f)); }
static inline float sg_d2f_odd(double d) {
  union { float f; unsigned int u; } x = { (float)d };
  if ((double)x.f == d || d != d) return x.f;
  if (fabs((double)x.f) > fabs(d)) x.u -= 1u;
  x.u |= 1u;
  return x.f;
}
/* kernel */
void E_16(unsigned short* restrict data0, const float* restrict data1) {
  for (int gidx0 = 0; gidx0 < 16; gidx0++) {
    float val0 = data1[gidx0];
    float alu0 = sg_rh(((float)(val0)));
    float alu1 = sg_rh((alu0+((float)0x1p+0f)));
    data0[gidx0] = sg_f2h(alu1);
  }
}
