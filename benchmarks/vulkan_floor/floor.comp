#version 450
// One invocation bumps a counter: the smallest dispatch that still does
// observable work, so the host can verify every submission really ran.
layout(local_size_x = 1) in;
layout(std430, set = 0, binding = 0) buffer Counter { uint count; };
void main() { count += 1u; }
