#version 450
// Moves the application's step counter past the steps of one evaluation of a recording: the
// last dispatch the recording holds, one invocation. forward_backward.comp and weight_grads.comp
// pick their batch as (base + offset) % batches, offset being the step's place in the recording,
// so the next evaluation of the same recording trains on the next batches.
//
// The counter stays below `batches` (the data set's length), so base + offset never overflows
// and the host knows where it stands: start % batches after any run that starts at `start`.
// train.py puts a barrier on the counter before this dispatch (the steps' reads of it come
// first) and at the start of the recording (the next evaluation reads what this one wrote).

layout(local_size_x = 1) in;

layout(std430, binding = 0) buffer Counter { uint base; };

layout(push_constant) uniform Push {
    uint steps;    // steps the recording holds
    uint batches;  // batches in the data set
} pc;

void main() {
    base = (base + pc.steps) % pc.batches;
}
