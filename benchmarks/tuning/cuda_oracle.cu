// Experiment, torch-free: how fast could any schedule copy these batches? An oracle that knows the sizes on
// the host cuts the batch's bytes (entries in order, as one stream) into equal 512-byte-aligned shares, one
// per warp, and hands each warp the pieces of entries its share covers: one read of its own table slots,
// then bytes, no scan, no lookup, no end-of-batch work. Against it our kernel's gap is what its scheduling
// costs; its own gap to cudaMemcpyAsync is what the tables' trip, the layout and the loads in flight cost.
// The op cannot work this way (its sizes may live only on the device). Variants in one run: 4 or 8 loads
// of 16 bytes in flight per work-item, plain or streaming (copy_words.h's load_word / store_word), at
// our grid (one 512-wide block per SM) and at two blocks per SM (the oracle needs few registers).
//   nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda benchmarks/tuning/cuda_oracle.cu -o oracle && ./oracle
#include "cuda_bench_common.cuh"

constexpr int kPieces = 4;  // table slots per warp: a share of step or tiny covers at most three entries
constexpr int kBlock = 512;

struct Piece {
  unsigned long long src, dst, words;  // words of 16 bytes; 0 ends a warp's list
};

template <int Unroll, bool Streaming>
__global__ void __launch_bounds__(kBlock, 2) oracle_copy(const Piece* pieces) {
  const long long w = (long long)blockIdx.x * (kBlock / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  xsc_cuda::CudaGroup<Unroll> g{nullptr, nullptr};  // the copy routine's loop, with Unroll loads in flight
  // Lane j reads slot j of the warp's list (one trip for the whole list), then hands it to every lane.
  const Piece mine = lane < kPieces ? pieces[w * kPieces + lane] : Piece{0, 0, 0};
  for (int j = 0; j < kPieces; ++j) {
    const xsc::u64 src = __shfl_sync(0xffffffffu, mine.src, j), dst = __shfl_sync(0xffffffffu, mine.dst, j);
    const int words = (int)__shfl_sync(0xffffffffu, mine.words, j);  // a share is far below 2^31 words
    if (words == 0) break;
    xsc::sg_copy_words<xsc::Word16, Streaming>(g, src, dst, words, false);
  }
}

// Per buffer set, the oracle's tables for `warps` warps: warp w copies bytes [w T / W, (w + 1) T / W) of the
// batch's T bytes (rounded down to 512), taken entry by entry. False if a share covers more than kPieces.
bool build_pieces(const BatchBuffers& buf, const std::vector<long long>& sizes, long long warps,
                  std::vector<Piece*>& out) {
  for (size_t k = 0; k < buf.src.size(); ++k) {
    std::vector<Piece> host(warps * kPieces, Piece{0, 0, 0});
    size_t e = 0;
    long long entry_start = 0;  // the batch offset where entry e starts
    for (long long w = 0; w < warps; ++w) {
      long long at = w * buf.total / warps / 512 * 512;
      const long long end = (w + 1) * buf.total / warps / 512 * 512;
      for (int j = 0; at < end; ++j) {
        while (at >= entry_start + sizes[e]) entry_start += sizes[e++];
        if (j == kPieces) return false;
        const long long off = at - entry_start, bytes = std::min(end, entry_start + sizes[e]) - at;
        host[w * kPieces + j] = {buf.host_tables[k][e] + off, buf.host_tables[k][buf.n + e] + off,
                                 (unsigned long long)bytes / 16};
        at += bytes;
      }
    }
    Piece* p = nullptr;
    CHECK(cudaMalloc(&p, host.size() * sizeof(Piece)));
    CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(Piece), cudaMemcpyHostToDevice));
    out.push_back(p);
  }
  return true;
}

template <int Unroll, bool Streaming>
void time_oracle(const BatchBuffers& buf, const std::vector<long long>& sizes, int blocks, float roof) {
  std::vector<Piece*> pieces;
  if (!build_pieces(buf, sizes, (long long)blocks * (kBlock / 32), pieces)) {
    std::printf("    oracle: a share covers more than %d entries, skipped\n", kPieces);
    return;
  }
  auto launch = [&](int k) { oracle_copy<Unroll, Streaming><<<blocks, kBlock>>>(pieces[k]); };
  long long bad = 0;
  const float ms = checked_median_ms(buf, sizes, launch, &bad);
  std::printf("    oracle %d blocks, %d loads, %-9s %8.4f ms  ratio %.3f  %s\n", blocks, Unroll,
              Streaming ? "streaming" : "plain", ms, roof / ms, bad ? "WRONG BYTES" : "verified");
  for (Piece* p : pieces) CHECK(cudaFree(p));
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int device = 0, sms = 0, blocks = 0, small_blocks = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CHECK(xsc_cuda::prepare_launch(xsc_cuda::batch_memcpy_kernel<false>, device, &blocks));
  CHECK(xsc_cuda::prepare_small_launch(xsc_cuda::batch_memcpy_kernel<true>, device, &small_blocks));
  // By default the two workloads the targets miss, in both layouts.
  for (const Workload& w : chosen_workloads("ORACLE_WORKLOADS", "step,tiny,step_p,tiny_p")) {
    BatchBuffers buf(w, 4);  // four rotated sets, as the sweep gives these workloads
    const int sets = (int)buf.src.size();
    const long long n = (long long)buf.n;
    auto ours = [&](int k) { launch_ours(buf, k, blocks, small_blocks); };
    const float roof = median_ms(
        [&](int k) { CHECK(cudaMemcpyAsync(buf.dst[k], buf.src[k], buf.total, cudaMemcpyDeviceToDevice)); }, sets);
    long long bad = 0;
    const float ms = checked_median_ms(buf, w.sizes, ours, &bad);
    std::printf("%-7s entries %5lld  memcpy %8.4f ms  ours %8.4f ms  ratio %.3f  %s\n", w.name, n, roof, ms, roof / ms,
                bad ? "WRONG BYTES" : "verified");
    for (int per_sm = 1; per_sm <= 2; ++per_sm) {
      time_oracle<4, false>(buf, w.sizes, per_sm * sms, roof);
      time_oracle<4, true>(buf, w.sizes, per_sm * sms, roof);
      time_oracle<8, false>(buf, w.sizes, per_sm * sms, roof);
      time_oracle<8, true>(buf, w.sizes, per_sm * sms, roof);
    }
    const float again = checked_median_ms(buf, w.sizes, ours, &bad);
    std::printf("        ours again %8.4f ms  ratio %.3f  %s\n", again, roof / again, bad ? "WRONG BYTES" : "verified");
  }
  return 0;
}
