__kernel void k() {}
// ÿþ
