// Torch-free sweep of the CUDA twin's tuning knobs (chunk size, unroll, threads, blocks per SM), each
// compiled as its own binary with -D flags by benchmarks/tuning/cuda_sweep.sh. Prints, per workload, the median
// time and the ratio to one cudaMemcpyAsync of the same total bytes (the roofline), after checking that
// every byte of the copy is right, and the same ratio for a plain copy of those bytes as one range with the
// same grid and unroll ("flat": what is left to gain from scheduling alone). SWEEP_WORKLOADS="step,tiny"
// runs only the named workloads; step_p and tiny_p are step and tiny in the bench's layout (random blocks of
// per-layer pools, int32 sizes). After step, step_p and step16, the same batch is timed through the copy_states
// kernel (step16 as one request of 1,152 states: the tile schedule's scan over computed spans).
// A second line per workload says what the tables' round trip costs: the flat copy after a read of three
// tables (flat_after_table), and both kernels with their tables in L2 (read just before each call).
#include <string>

#include "cuda_bench_common.cuh"
#include "cuda_state_plans.cuh"

__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    flat_copy(const xsc::Word16* src, xsc::Word16* dst, long long words) {
  flat_copy_body(src, dst, words);
}

// The flat copy, but every work-item first reads three 8-byte values (zero) from `zeros` and adds them to
// its addresses: warp w reads slot w of three tables, as the batch kernel's sub-group w reads entry w of the
// source, destination and size tables before its first load. What the tables' round trip alone costs.
__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    flat_after_table(const xsc::Word16* src, xsc::Word16* dst, long long words, const unsigned long long* zeros) {
  const long long warps = (long long)gridDim.x * blockDim.x / 32;
  const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const unsigned long long z = zeros[w] + zeros[warps + w] + zeros[2 * warps + w];
  flat_copy_body(src + z, dst + z, words);
}

// Reads `words` 8-byte values at p, which leaves them in L2: the tables as a host copy that just wrote them
// would leave them (vLLM builds its tables for each call).
__global__ void touch_words(const unsigned long long* p, long long words, unsigned long long* sink) {
  unsigned long long acc = 0;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += step) acc ^= p[i];
  if (acc == 0x9e3779b97f4a7c15ull) *sink = acc;  // a store that (all but) never happens keeps the loads
}

// Per buffer set, three tables of one zero per warp of the grid, for flat_after_table.
struct ZeroTables {
  std::vector<unsigned long long*> sets;
  long long words;
  ZeroTables(int count, long long warps) : sets(count), words(3 * warps) {
    for (unsigned long long*& z : sets) {
      CHECK(cudaMalloc(&z, words * 8));
      CHECK(cudaMemset(z, 0, words * 8));
    }
  }
  ZeroTables(const ZeroTables&) = delete;  // owns device memory
  ZeroTables& operator=(const ZeroTables&) = delete;
  ~ZeroTables() {
    for (unsigned long long* z : sets) CHECK(cudaFree(z));
  }
};

// One result line: a kernel's median against cudaMemcpyAsync of the same bytes, with a note and the check.
void print_result(const char* name, size_t n, long long total, float ms, float roof, const std::string& note,
                  long long bad) {
  std::printf("  %-7s entries %5zu  %8.1f MiB  ours %8.4f ms  memcpy %8.4f ms  ratio %.3f  (%s)  %s\n", name, n,
              total / 1048576.0, ms, roof, roof / ms, note.c_str(), bad ? "WRONG BYTES" : "verified");
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines out as they come, also when a time limit stops the run
  int device = 0, sms = 0, per_sm = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int blocks = 0;
  CHECK(xsc_cuda::prepare_launch(xsc_cuda::batch_memcpy_kernel<false>, device, &blocks));
  int small_blocks = 0;
  CHECK(xsc_cuda::prepare_small_launch(xsc_cuda::batch_memcpy_kernel<true>, device, &small_blocks));
  std::printf("small-batch build: %d blocks of %d\n", small_blocks, xsc_cuda::kSmallThreads);
  int state_blocks = 0, state_small_blocks = 0;
  CHECK(xsc_cuda::prepare_launch(xsc_cuda::copy_states_kernel<false>, device, &state_blocks));
  CHECK(xsc_cuda::prepare_small_launch(xsc_cuda::copy_states_kernel<true>, device, &state_small_blocks));
  per_sm = blocks / sms;
  std::printf("variant chunk=%lld unroll=%d threads=%d min_blocks=%d items=%d -> %d blocks/SM, grid %d\n",
              (long long)xsc::kChunkBytes, xsc::kUnroll, xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS, xsc::kItems, per_sm,
              blocks);
  unsigned long long* sink = nullptr;  // touch_words' never-taken store
  CHECK(cudaMalloc(&sink, 8));
  constexpr int kMaxSets = 4;  // buffer sets of a workload: 4 when its working set would sit in L2, else 1
  const ZeroTables zeros(kMaxSets, (long long)blocks * xsc_cuda::kThreads / 32);
  for (const Workload& w : chosen_workloads("SWEEP_WORKLOADS", nullptr)) {  // e.g. "step,tiny": just these
    long long total = 0;
    for (long long s : w.sizes) total += s;
    BatchBuffers buf(w, total * 2 < (200ll << 20) ? kMaxSets : 1);
    const int sets = (int)buf.src.size();
    const size_t n = buf.n;
    const auto &src = buf.src, &dst = buf.dst;
    const auto& tables = buf.tables;
    const auto& sizes_dev = buf.sizes;
    auto launch = [&](int k) { launch_ours(buf, k, blocks, small_blocks); };
    long long bad = 0;
    float ours = checked_median_ms(buf, w.sizes, launch, &bad);
    float flat = median_ms([&](int k) {
      flat_copy<<<blocks, xsc_cuda::kThreads>>>((const xsc::Word16*)src[k], (xsc::Word16*)dst[k], total / 16);
    }, sets);
    float roof =
        median_ms([&](int k) { CHECK(cudaMemcpyAsync(dst[k], src[k], total, cudaMemcpyDeviceToDevice)); }, sets);
    char flat_note[32];
    std::snprintf(flat_note, sizeof flat_note, "flat %.3f", roof / flat);
    print_result(w.name, n, total, ours, roof, flat_note, bad);
    auto flat_table = [&](int k) {
      flat_after_table<<<blocks, xsc_cuda::kThreads>>>((const xsc::Word16*)src[k], (xsc::Word16*)dst[k], total / 16,
                                                       zeros.sets[k]);
    };
    auto touch_zeros = [&](int k) { touch_words<<<64, 256>>>(zeros.sets[k], zeros.words, sink); };
    auto touch_tables = [&](int k) {
      touch_words<<<64, 256>>>(tables[k], 2 * (long long)n, sink);
      touch_words<<<64, 256>>>((const unsigned long long*)sizes_dev[k], (long long)n / (buf.sizes64 ? 1 : 2), sink);
    };
    const float flat_cold = median_ms(flat_table, sets), flat_warm = median_ms(flat_table, sets, touch_zeros);
    const float ours_warm = median_ms(launch, sets, touch_tables);
    std::printf("  %-7s tables: flat after a table read %.3f (tables in L2 %.3f); ours, tables in L2 %.3f\n", w.name,
                roof / flat_cold, roof / flat_warm, roof / ours_warm);
    if (std::string(w.name) != "step" && std::string(w.name) != "step_p" && std::string(w.name) != "step16") continue;
    // The same batch through copy_states (one request of n whole-block states): its own build and registers.
    StatePlans states(buf, w.sizes);
    auto run_states = [&](int k) { launch_states(buf, states, k, state_blocks, state_small_blocks); };
    long long bad_states = 0;
    const float ms_states = checked_median_ms(buf, w.sizes, run_states, &bad_states);
    print_result("states", n, total, ms_states, roof, "copy_states", bad_states);
  }
  CHECK(cudaFree(sink));
  return 0;
}
