#version 450
#extension GL_GOOGLE_include_directive : require
// One training step's forward pass, loss, and backward pass through the activations, for the
// whole network, in ONE dispatch: each workgroup owns ROWS rows of the batch.
//
// Why this fuses: every layer of the model (linear maps, LoRA, ReLU, residual adds) and the
// mean squared error act on each row of the batch independently, and so does the backward pass
// through the activations (dz = dy W + dt A, the ReLU masks, the residual adds). Only the
// gradients of the LoRA weights sum over the batch; they are left to weight_grads.comp, which
// runs after one memory barrier. A workgroup therefore never waits for another: no grid-wide
// synchronisation (which Vulkan cannot express inside a dispatch), only workgroup barriers.
//
// The model: blocks h <- h + lin_n(relu(... relu(lin_1(h)))), lin(z) = z W^T + s (z A^T) B^T,
// W [DIM, DIM] frozen, A [RANK, DIM], B [DIM, RANK]. The rows' vectors live in shared memory;
// every dot product is split into a fixed number of partial sums over fixed chunks, added in a
// fixed order: the result is the same bit for bit on every run (resume from checkpoint works).
// Each weight a thread loads serves its workgroup's ROWS rows (ROWS accumulators in registers):
// ROWS trades parallelism (BATCH / ROWS workgroups) against weight loads per row.
//
// What the weight-gradient pass needs (each module's input z, t = z A^T, dy and dt, the rows'
// loss) goes to the "saved" buffer (saved.glsl has its layout).

layout(local_size_x_id = 0, local_size_x = 256) in;

#include "saved.glsl"

// Partial sums per output: a DIM-long dot product (z W^T, dy W) is split into SPLIT_D chunks,
// a RANK-output one (z A^T, dy B) into SPLIT_R, so more threads work at once and each walks a
// shorter chain; the host picks them (train.py: splits()).
layout(constant_id = 6) const uint SPLIT_D = 2u;
layout(constant_id = 7) const uint SPLIT_R = 11u;

const uint WG = gl_WorkGroupSize.x;
const uint CHUNK_D = (DIM + SPLIT_D - 1u) / SPLIT_D;
const uint CHUNK_R = (DIM + SPLIT_R - 1u) / SPLIT_R;
const uint ITEMS_D = SPLIT_D * DIM;           // work items of a DIM-output product ...
const uint ITEMS = ITEMS_D + SPLIT_R * RANK;  // ... then those of a RANK-output one
const uint PARTS_D = ROWS * ITEMS_D;          // partial sums: ROWS per work item
const uint PARTS = ROWS * ITEMS;
const uint SCRATCH = PARTS > WG ? PARTS : WG;  // also the loss's reduction (WG floats)

// Frozen weights, per module m: W^T at 2 m DIM^2 and W at (2 m + 1) DIM^2. Both layouts are
// stored so that both passes read them coalesced: consecutive threads read consecutive floats
// (forward y[j] = sum_k z[k] W^T[k, j]; backward dz[k] = sum_j dy[j] W[j, k]).
layout(std430, binding = 0) readonly buffer Frozen { float frozen[]; };
layout(std430, binding = 1) readonly buffer Inputs { float xs[]; };   // [steps, BATCH, DIM]
layout(std430, binding = 2) readonly buffer Targets { float ys[]; };  // [steps, BATCH, DIM]
layout(std430, binding = 3) readonly buffer Params { float prm[]; };  // the optimizer's params
layout(std430, binding = 4) readonly buffer Table { uvec4 table[]; }; // per module (saved.glsl)
layout(std430, binding = 5) buffer Saved { float saved[]; };          // layout: saved.glsl
layout(std430, binding = 6) readonly buffer Counter { uint base; };   // the app's step counter

layout(push_constant) uniform Push {
    uint offset;       // this step's place in the recording: it trains on batch base + offset
    uint batches;      // batches in the data set (xs, ys): the index wraps around it
    float scale;       // LoRA scale s = alpha / rank
    float grad_scale;  // d mean((out - y)^2) / d out = grad_scale * (out - y), grad_scale = 2 / n
} pc;

// Three blocks of row vectors ([ROWS][DIM] each). Forward: the block's input h (the residual),
// the module's input z and its output y. Backward: the block output's gradient g, the module
// output's gradient dy and the module input's gradient dz. Which array plays which role
// changes as the pass goes on.
shared float vec[3][ROWS * DIM];
shared float lowrank[ROWS * RANK];  // t = z A^T (forward) or dt = s dy B (backward)
shared float part[SCRATCH];         // partial sums

// Element e = r DIM + j (row r, column j) of every [ROWS][DIM] block is owned by thread
// e % WG: it alone combines, writes and saves it. So a thread that reads back an element it
// saved earlier (the ReLU mask) reads its own write and needs no barrier; everything another
// thread wrote is read after a barrier().

uint other(uint a, uint b) {  // an array that is neither a nor b
    for (uint i = 0u; i < 3u; ++i) {
        if (i != a && i != b) {
            return i;
        }
    }
    return 0u;
}

// Partial sums of two products of the row vectors vec[src], for every row r < ROWS:
//   part[(p ROWS + r) DIM + o]           = sum_{i in chunk p} vec[src][r, i] frozen[mat + i DIM + o]
//   part[PARTS_D + (p ROWS + r) RANK + k] = sum_{i in chunk p} vec[src][r, i] prm[low + i is + k ks]
// The first is skipped when mat_on is false. Work items are spread over every thread.
void partial_sums(uint src, bool mat_on, uint mat, uint low, uint is, uint ks) {
    uint start = mat_on ? 0u : ITEMS_D;
    for (uint w = start + gl_LocalInvocationID.x; w < ITEMS; w += WG) {
        float acc[ROWS];
        for (uint r = 0u; r < ROWS; ++r) {
            acc[r] = 0.0;
        }
        if (w < ITEMS_D) {
            uint p = w / DIM, o = w % DIM;
            uint end = min(DIM, (p + 1u) * CHUNK_D);
            for (uint i = p * CHUNK_D; i < end; ++i) {
                float wt = frozen[mat + i * DIM + o];  // one load serves ROWS rows
                for (uint r = 0u; r < ROWS; ++r) {
                    acc[r] += vec[src][r * DIM + i] * wt;
                }
            }
            for (uint r = 0u; r < ROWS; ++r) {
                part[(p * ROWS + r) * DIM + o] = acc[r];
            }
        } else {
            uint p = (w - ITEMS_D) / RANK, k = (w - ITEMS_D) % RANK;
            uint end = min(DIM, (p + 1u) * CHUNK_R);
            for (uint i = p * CHUNK_R; i < end; ++i) {
                float wt = prm[low + i * is + k * ks];
                for (uint r = 0u; r < ROWS; ++r) {
                    acc[r] += vec[src][r * DIM + i] * wt;
                }
            }
            for (uint r = 0u; r < ROWS; ++r) {
                part[PARTS_D + (p * ROWS + r) * RANK + k] = acc[r];
            }
        }
    }
}

float sum_dim_parts(uint r, uint o) {  // row r, output o of the DIM-output product: chunks in order
    float acc = 0.0;
    for (uint p = 0u; p < SPLIT_D; ++p) {
        acc += part[(p * ROWS + r) * DIM + o];
    }
    return acc;
}

float sum_rank_parts(uint r, uint k) {
    float acc = 0.0;
    for (uint p = 0u; p < SPLIT_R; ++p) {
        acc += part[PARTS_D + (p * ROWS + r) * RANK + k];
    }
    return acc;
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint row0 = gl_WorkGroupID.x * ROWS;  // this workgroup's first row of the batch
    // Rows past the batch (when ROWS does not divide BATCH) compute on zeros and save nothing.
    const uint rows = min(ROWS, BATCH - row0);
    // The batch comes from the device's counter (advance.comp moves it after each evaluation
    // of a recording), not from a push constant: push constants are frozen when a step is
    // recorded, and one recording is evaluated again and again.
    const uint step = (base + pc.offset) % pc.batches;
    const uint data = (step * BATCH + row0) * DIM;  // these rows in xs and ys

    // ---- forward ------------------------------------------------------------------------
    uint h = 0u;  // the block's input (vec[h]), kept for the residual add
    for (uint e = tid; e < ROWS * DIM; e += WG) {
        vec[h][e] = e < rows * DIM ? xs[data + e] : 0.0;
    }
    barrier();
    uint z = h;
    for (uint m = 0u; m < MODULES; ++m) {
        const uvec4 entry = table[m];  // the same for every thread: barriers stay in uniform flow
        const bool last = (entry.z & LAST_IN_BLOCK) != 0u;
        const uint y = other(z, h);
        for (uint e = tid; e < rows * DIM; e += WG) {
            saved[z_at(m, row0) + e] = vec[z][e];
        }
        // z W^T (W^T of module m) and t = z A^T (A [RANK, DIM]: element (i, k) at i + k DIM).
        partial_sums(z, true, 2u * m * DIM * DIM, entry.x, 1u, DIM);
        barrier();
        for (uint e = tid; e < ROWS * RANK; e += WG) {
            const float t = sum_rank_parts(e / RANK, e % RANK);
            lowrank[e] = t;
            if (e < rows * RANK) {
                saved[t_at(m, row0) + e] = t;
            }
        }
        barrier();
        // y = z W^T + s t B^T (as the NumPy model adds them); + h on the block's last module,
        // else the ReLU between modules.
        for (uint e = tid; e < ROWS * DIM; e += WG) {
            const uint r = e / DIM, j = e % DIM;
            float lora = 0.0;
            for (uint k = 0u; k < RANK; ++k) {
                lora += lowrank[r * RANK + k] * prm[entry.y + j * RANK + k];
            }
            const float pre = sum_dim_parts(r, j) + pc.scale * lora;
            vec[y][e] = last ? vec[h][e] + pre : max(pre, 0.0);
        }
        barrier();  // vec[y] complete; part and lowrank free again
        z = y;
        if (last) {
            h = y;  // the next block's input
        }
    }

    // ---- loss: err = out - target; the gradient 2 err / n; the rows' sum of err^2 -----------
    const uint g0 = other(h, h);
    float sq = 0.0;
    for (uint e = tid; e < ROWS * DIM; e += WG) {
        const float err = e < rows * DIM ? vec[h][e] - ys[data + e] : 0.0;
        vec[g0][e] = pc.grad_scale * err;
        sq += err * err;
    }
    part[tid] = sq;
    barrier();
    for (uint width = WG / 2u; width > 0u; width >>= 1u) {  // fixed-order tree (WG: a power of 2)
        if (tid < width) {
            part[tid] += part[tid + width];
        }
        barrier();
    }
    if (tid == 0u) {
        saved[LOSS_BASE + gl_WorkGroupID.x] = part[0];
    }
    barrier();  // part[0] read before part is reused

    // ---- backward through the activations --------------------------------------------------
    uint g = g0;  // d loss / d (the current block's output)
    uint dy = g;  // d loss / d (the current module's output, before its ReLU)
    for (uint mi = MODULES; mi > 0u; --mi) {
        const uint m = mi - 1u;
        const uvec4 entry = table[m];
        const bool first = (entry.z & FIRST_IN_BLOCK) != 0u;
        const bool need_dz = m > 0u;  // no gradient w.r.t. the network's inputs
        const uint dz = other(dy, g);
        for (uint e = tid; e < rows * DIM; e += WG) {
            saved[dy_at(m, row0) + e] = vec[dy][e];
        }
        // dy W (W of module m) and dy B (B [DIM, RANK]: element (i, k) at i RANK + k).
        partial_sums(dy, need_dz, (2u * m + 1u) * DIM * DIM, entry.y, RANK, 1u);
        barrier();
        for (uint e = tid; e < ROWS * RANK; e += WG) {
            const float dt = pc.scale * sum_rank_parts(e / RANK, e % RANK);
            lowrank[e] = dt;
            if (e < rows * RANK) {
                saved[dt_at(m, row0) + e] = dt;
            }
        }
        barrier();
        if (!need_dz) {
            break;
        }
        // dz = dy W + dt A; then either the ReLU's mask (the module's input z > 0: the previous
        // module's output), or, on the block's first module, the residual: g <- g + dz.
        for (uint e = tid; e < ROWS * DIM; e += WG) {
            const uint r = e / DIM, k = e % DIM;
            float lora = 0.0;
            for (uint q = 0u; q < RANK; ++q) {
                lora += lowrank[r * RANK + q] * prm[entry.x + q * DIM + k];
            }
            const float grad = sum_dim_parts(r, k) + lora;
            // The mask was saved by this very thread in the forward pass (rows past the batch
            // saved nothing; their values are never used).
            const bool on = e < rows * DIM && saved[z_at(m, row0) + e] > 0.0;
            vec[dz][e] = first ? vec[g][e] + grad : (on ? grad : 0.0);
        }
        barrier();
        if (first) {
            g = dz;
        }
        dy = dz;
    }
}
