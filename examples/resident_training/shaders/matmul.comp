#version 450
// Tiled shared-memory matmul with a fused epilogue: every forward and backward step of the
// resident demo is one dispatch of this shader (plus mse_loss.comp for the loss).
//
//   C[i, j] = epilogue(alpha * sum_k A(i, k) * B(k, j) + beta * D[i, j])
//
// A and B are read through strides (row stride, column stride), so A^T or B^T costs nothing:
// A(i, k) = buf[a_off + i * a_rs + k * a_cs]. A and B come from the workspace (binding 0) or the
// LoRA params (binding 1, the optimizer's flat param buffer); C goes to the workspace or to the
// optimizer's flat gradient buffer (binding 2). D and the ReLU mask live in the workspace.
//
// Each workgroup computes 16x16 tiles of C; it walks K in 16-wide slabs staged in shared
// memory. The grid is fixed when the pipeline is made, so workgroups stride over the tiles:
// one pipeline serves every matmul shape. Each output is summed in a fixed order, so results
// are deterministic (bit-identical run to run).
layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(std430, binding = 0) buffer Workspace { float ws[]; };
layout(std430, binding = 1) readonly buffer Params { float prm[]; };
layout(std430, binding = 2) writeonly buffer Grads { float grd[]; };

layout(push_constant) uniform Push {
    uint m, n, k;               // C is m x n, the sum runs over k
    uint a_buf, a_off, a_rs, a_cs;  // a_buf: 0 workspace, 1 params
    uint b_buf, b_off, b_rs, b_cs;
    uint c_buf, c_off, ldc;     // c_buf: 0 workspace, 2 grads; C row-major with row stride ldc
    uint d_off;                 // D (read when beta != 0): workspace, same layout as C
    uint mode;                  // 0: none, 1: ReLU, 2: zero where mask <= 0 (ReLU backward)
    uint mask_off;              // the mask (a ReLU output): workspace, same layout as C
    uint tiles_n;               // ceil(n / 16)
    float alpha, beta;
} pc;

shared float As[16][17];  // +1 column: no bank conflicts on a real GPU
shared float Bs[16][17];

float load(uint buf, uint i) {
    return buf == 0u ? ws[i] : prm[i];
}

void main() {
    uint tx = gl_LocalInvocationID.x;  // column within the tile
    uint ty = gl_LocalInvocationID.y;  // row within the tile
    uint tiles = ((pc.m + 15u) / 16u) * pc.tiles_n;
    // Uniform across the workgroup, so barrier() below is in uniform control flow.
    for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x) {
        uint row = (tile / pc.tiles_n) * 16u + ty;
        uint col = (tile % pc.tiles_n) * 16u + tx;
        float acc = 0.0;
        for (uint k0 = 0u; k0 < pc.k; k0 += 16u) {
            uint ka = k0 + tx;
            As[ty][tx] = (row < pc.m && ka < pc.k) ? load(pc.a_buf, pc.a_off + row * pc.a_rs + ka * pc.a_cs) : 0.0;
            uint kb = k0 + ty;
            Bs[ty][tx] = (kb < pc.k && col < pc.n) ? load(pc.b_buf, pc.b_off + kb * pc.b_rs + col * pc.b_cs) : 0.0;
            barrier();
            for (uint kk = 0u; kk < 16u; ++kk) {
                acc += As[ty][kk] * Bs[kk][tx];
            }
            barrier();
        }
        if (row < pc.m && col < pc.n) {
            uint idx = row * pc.ldc + col;
            float r = pc.alpha * acc;
            if (pc.beta != 0.0) {
                r += pc.beta * ws[pc.d_off + idx];
            }
            if (pc.mode == 1u) {
                r = max(r, 0.0);
            } else if (pc.mode == 2u && !(ws[pc.mask_off + idx] > 0.0)) {
                r = 0.0;
            }
            if (pc.c_buf == 2u) {
                grd[pc.c_off + idx] = r;
            } else {
                ws[pc.c_off + idx] = r;
            }
        }
    }
}
