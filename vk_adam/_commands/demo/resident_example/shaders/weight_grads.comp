#version 450
#extension GL_GOOGLE_include_directive : require
// The gradients of every LoRA weight of the network, in ONE dispatch, from what
// forward_backward.comp saved (after a memory barrier), straight into the optimizer's flat
// gradient buffer; and the step's loss.
//
//   grad B[j, r] = s * sum_b dy[b, j] t[b, r]     (as the NumPy model: s (dy^T t))
//   grad A[r, k] =     sum_b dt[b, r] z[b, k]     (dt already carries s)
//
// One thread per gradient element, every module's in one grid; each sums over the batch rows
// in order (b = 0, 1, ...), so the gradients are the same bit for bit on every run. These are
// the only sums over the batch in a step, which is why they are a pass of their own: the
// forward/backward pass runs one workgroup per row and no workgroup can wait for another.

layout(local_size_x_id = 0, local_size_x = 256) in;

#include "saved.glsl"

layout(std430, binding = 0) readonly buffer Saved { float saved[]; };
layout(std430, binding = 1) readonly buffer Table { uvec4 table[]; };
layout(std430, binding = 2) writeonly buffer Grads { float grd[]; };    // the optimizer's grads
layout(std430, binding = 3) writeonly buffer Losses { float losses[]; };
layout(std430, binding = 4) readonly buffer Counter { uint base; };  // the app's step counter

layout(push_constant) uniform Push {
    uint offset;   // this step's place in the recording (as forward_backward.comp's)
    uint batches;  // batches in the data set: `losses` has one slot per batch
    float scale;   // LoRA scale s = alpha / rank
} pc;

const uint PER_B = DIM * RANK;     // grad B elements per module
const uint PER_MODULE = 2u * PER_B;  // then as many of grad A

void main() {
    const uint id = gl_GlobalInvocationID.x;
    if (id == 0u) {
        // The loss: mean of err^2 over the batch; the workgroups' sums added in order.
        float total = 0.0;
        for (uint g = 0u; g < GROUPS; ++g) {
            total += saved[LOSS_BASE + g];
        }
        losses[(base + pc.offset) % pc.batches] = total / float(BATCH * DIM);
    }
    if (id >= MODULES * PER_MODULE) {
        return;
    }
    const uint m = id / PER_MODULE;
    const uvec4 entry = table[m];
    float acc = 0.0;
    if (id % PER_MODULE < PER_B) {
        // Consecutive threads: consecutive r of one j, then the next j (B is [DIM, RANK]).
        const uint e = id % PER_MODULE, j = e / RANK, r = e % RANK;
        for (uint b = 0u; b < BATCH; ++b) {
            acc += saved[dy_at(m, b) + j] * saved[t_at(m, b) + r];
        }
        grd[entry.y + e] = pc.scale * acc;
    } else {
        // Consecutive threads: consecutive k (A is [RANK, DIM]): z is read coalesced.
        const uint e = id % PER_MODULE - PER_B, r = e / DIM, k = e % DIM;
        for (uint b = 0u; b < BATCH; ++b) {
            acc += saved[dt_at(m, b) + r] * saved[z_at(m, b) + k];
        }
        grd[entry.x + e] = acc;
    }
}
