// Shared by forward_backward.comp and weight_grads.comp (and mirrored by train.py's
// SavedLayout): the model's shape as specialization constants, and where the forward/backward
// pass leaves what the weight-gradient pass reads.
//
// Specialization constants (ids 1..5; id 0 is each shader's workgroup size) are fixed when the
// pipeline is made, so loop bounds are compile-time constants for the driver's compiler.
layout(constant_id = 1) const uint DIM = 128u;     // hidden size (square frozen W)
layout(constant_id = 2) const uint RANK = 8u;      // LoRA rank
layout(constant_id = 3) const uint BATCH = 64u;    // rows of a batch
layout(constant_id = 4) const uint MODULES = 16u;  // LoRA modules, in the order they are applied
layout(constant_id = 5) const uint ROWS = 1u;      // batch rows per workgroup of forward_backward
const uint GROUPS = (BATCH + ROWS - 1u) / ROWS;    // its workgroups

// The "saved" buffer, per module m and batch row b (all float32, row-major):
//   z[m][b][DIM]    the module's input (for grad A, and the ReLU mask of the backward pass)
//   dy[m][b][DIM]   d loss / d (the module's output, before its ReLU)   (for grad B)
//   t[m][b][RANK]   z A^T                                                (for grad B)
//   dt[m][b][RANK]  scale * dy B                                         (for grad A)
//   loss[g]         sum over workgroup g's rows of (out - target)^2  (g < GROUPS)
const uint Z_BASE = 0u;
const uint DY_BASE = MODULES * BATCH * DIM;
const uint T_BASE = 2u * MODULES * BATCH * DIM;
const uint DT_BASE = T_BASE + MODULES * BATCH * RANK;
const uint LOSS_BASE = DT_BASE + MODULES * BATCH * RANK;

uint z_at(uint m, uint b) { return Z_BASE + (m * BATCH + b) * DIM; }
uint dy_at(uint m, uint b) { return DY_BASE + (m * BATCH + b) * DIM; }
uint t_at(uint m, uint b) { return T_BASE + (m * BATCH + b) * RANK; }
uint dt_at(uint m, uint b) { return DT_BASE + (m * BATCH + b) * RANK; }

// The module table (binding "Table"): one uvec4 per module.
//   x: offset of lora_A [RANK, DIM] in the optimizer's param/grad buffers
//   y: offset of lora_B [DIM, RANK] in the same buffers
//   z: flags: FIRST_IN_BLOCK | LAST_IN_BLOCK
const uint FIRST_IN_BLOCK = 1u;
const uint LAST_IN_BLOCK = 2u;
