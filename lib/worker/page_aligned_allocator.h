// crl-worker's CPU allocator (every role; what matters is the program workers): blocks of 64 KiB and more start on a page boundary.
#pragma once

namespace crl::worker {

// Makes LibTorch's CPU allocations in this process page-aligned from 64 KiB up (smaller ones keep
// LibTorch's 64-byte alignment). Why: where a large output lands relative to its inputs, modulo a
// page, follows from everything the process allocated before (glibc carves blocks from one heap),
// so the reference's timing worker and a candidate's worker, with their different histories, wrote
// the same outputs at different offsets from the same inputs (measured: 1216-1536 bytes into a page
// for the reference, 1152-1280 for the candidate, inputs page-aligned), a difference that a CPU
// whose loads and stores collide by their low address bits times as a speed difference. Page-aligned,
// both programs' outputs lie the same way. Call once, before the program loads.
void use_page_aligned_cpu_allocator();

}  // namespace crl::worker
