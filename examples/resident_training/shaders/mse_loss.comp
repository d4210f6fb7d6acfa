#version 450
// Mean squared error of the network's output against this step's targets, and its gradient.
//   err = out - target;  grad = grad_scale * err (= 2 err / n);  losses[step] = mean(err^2)
// One workgroup; each thread sums a strided share, then a fixed-order tree reduction in shared
// memory: the loss is deterministic. The host reads `losses` only every few steps.
layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) buffer Workspace { float ws[]; };
layout(std430, binding = 1) writeonly buffer Losses { float losses[]; };

layout(push_constant) uniform Push {
    uint n;          // elements of the output (batch * dim)
    uint out_off;    // the network's output in the workspace
    uint y_off;      // this step's targets in the workspace
    uint g_off;      // where the gradient goes (workspace)
    uint step;       // slot in `losses`
    float grad_scale;
} pc;

shared float part[256];

void main() {
    uint i = gl_LocalInvocationID.x;
    float s = 0.0;
    for (uint e = i; e < pc.n; e += 256u) {
        float err = ws[pc.out_off + e] - ws[pc.y_off + e];
        ws[pc.g_off + e] = pc.grad_scale * err;
        s += err * err;
    }
    part[i] = s;
    barrier();
    for (uint w = 128u; w > 0u; w >>= 1u) {
        if (i < w) {
            part[i] += part[i + w];
        }
        barrier();
    }
    if (i == 0u) {
        losses[pc.step] = part[0] / float(pc.n);
    }
}
