// C++ tests of the torch-free core: the run-time compiled kernel on the SYCL CPU device against a memmove
// reference, on host memory (the CPU device reads plain host memory through raw pointers).
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "launcher.h"

namespace {

struct Case {
  int64_t src_off, dst_off, size;  // offsets into one arena, so overlaps are expressible
};

std::mt19937_64 rng(1234);
int failures = 0;

// Runs `cases` through the kernel on a fresh random arena and compares every byte with memmove applied
// in order (entries are disjoint, so order does not matter for a correct kernel).
void check(sycl::queue& q, const char* name, const std::vector<Case>& cases, size_t arena_bytes,
           bool sizes64) {
  std::vector<unsigned char> arena(arena_bytes), expect;
  for (auto& b : arena) b = (unsigned char)rng();
  expect = arena;
  std::vector<uint64_t> src, dst;
  std::vector<int64_t> sizes64v;
  std::vector<int32_t> sizes32v;
  for (const Case& c : cases) {
    src.push_back((uint64_t)(uintptr_t)(arena.data() + c.src_off));
    dst.push_back((uint64_t)(uintptr_t)(arena.data() + c.dst_off));
    sizes64v.push_back(c.size);
    sizes32v.push_back((int32_t)c.size);
    std::memmove(expect.data() + c.dst_off, expect.data() + c.src_off, (size_t)c.size);
  }
  xsc_sycl::BatchMemcpyArgs args{src.data(), dst.data(),
                                 sizes64 ? (const void*)sizes64v.data() : (const void*)sizes32v.data(),
                                 sizes64, (int64_t)cases.size()};
  xsc_sycl::launch_batch_memcpy(q, args).wait_and_throw();
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < arena_bytes; ++i)
    if (arena[i] != expect[i] && bad++ == 0) first_bad = i;
  std::printf("%-40s %s", name, bad ? "FAIL" : "ok");
  if (bad) std::printf(" (%zu bytes differ, first at %zu)", bad, first_bad);
  std::printf("\n");
  failures += bad != 0;
}

}  // namespace

int main() {
  sycl::queue q{sycl::cpu_selector_v, sycl::property::queue::in_order()};
  std::printf("device: %s, kernel: %s\n", q.get_device().get_info<sycl::info::device::name>().c_str(),
              xsc_sycl::kernel_origin());

  check(q, "N = 0", {}, 64, false);
  check(q, "one entry of 0 bytes", {{0, 32, 0}}, 64, false);

  // Odd sizes at every source/destination offset 0..15, far apart (no overlap).
  std::vector<Case> odd;
  int64_t cursor = 0;
  const int64_t sizes[] = {1, 3, 15, 16, 17, 255, 4095, 65536 + 3, (1 << 20) + 7};
  for (int64_t s : sizes)
    for (int o = 0; o < 16; o += 5) {
      odd.push_back({cursor + o, cursor + s + 64 + (o * 7) % 16, s});
      cursor += 2 * s + 128;
    }
  check(q, "odd sizes and alignments, int32 sizes", odd, (size_t)cursor, false);
  check(q, "odd sizes and alignments, int64 sizes", odd, (size_t)cursor, true);

  // Every (source mod 16, destination mod 16) pair at every size 0..300, then at sizes of several copy
  // units: the mismatched pairs take the shifted 16-byte path (aligned loads merged into aligned stores).
  auto every_pair = [](const std::vector<int64_t>& sizes, int64_t* end) {
    std::vector<Case> pairs;
    int64_t at = 0;
    for (int64_t s : sizes)
      for (int pair = 0; pair < 256; ++pair) {
        const int64_t src = at + pair / 16, dst = at + s + 48 + pair % 16;
        pairs.push_back({src, dst, s});
        at = dst - pair % 16 + s + 48;
      }
    *end = at + 64;
    return pairs;
  };
  std::vector<int64_t> upto300;
  for (int64_t s = 0; s <= 300; ++s) upto300.push_back(s);
  int64_t end = 0;
  std::vector<Case> pairs = every_pair(upto300, &end);
  check(q, "every offset pair, sizes 0..300", pairs, (size_t)end, false);
  pairs = every_pair({8191, 8192 * 3 + 5, 12345}, &end);
  check(q, "every offset pair, multi-unit sizes", pairs, (size_t)end, true);

  // Overlapping entries (memmove): left and right shifts, small and large, aligned and not.
  std::vector<Case> overlap;
  cursor = 0;
  const int64_t shifts[] = {1, 2, 3, 5, 8, 11, 15, 16, 17, 100, 4096};
  for (int64_t sh : shifts)
    for (int64_t s : {(int64_t)300, (int64_t)70000}) {
      overlap.push_back({cursor + sh, cursor, s});        // left shift: dst < src < dst + size
      overlap.push_back({cursor + s + 9000, cursor + s + 9000 + sh, s});  // right shift
      cursor += 2 * s + 20000;
    }
  check(q, "overlapping left and right shifts", overlap, (size_t)cursor, false);

  // Many tiny entries: more entries than one work-group's tile.
  std::vector<Case> tiny;
  cursor = 0;
  for (int i = 0; i < 3000; ++i) {
    int64_t s = (int64_t)(rng() % 200);
    tiny.push_back({cursor, cursor + 256, s});
    cursor += 512;
  }
  check(q, "3000 tiny entries", tiny, (size_t)cursor, true);

  // A few entries of many copy units each, beside short, empty and overlapping ones: fewer entries than the
  // grid has sub-groups, so each entry is spread over many of them.
  for (int n : {1, 5, 40}) {
    std::vector<Case> few;
    cursor = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t big = (4 << 20) / n;
      const int64_t s = i % 5 == 4 ? (int64_t)(rng() % 3) * 8191 : big / 2 + (int64_t)(rng() % (uint64_t)(big / 2));
      if (i % 7 == 3) {  // an in-place left shift
        few.push_back({cursor + 100, cursor, s});
        cursor += s + 256;
      } else {
        few.push_back({cursor + (int64_t)(rng() % 16), cursor + s + 64 + (int64_t)(rng() % 16), s});
        cursor += 2 * s + 256;
      }
    }
    const std::string name = std::to_string(n) + " entries of many units";
    check(q, name.c_str(), few, (size_t)cursor, n % 2 == 1);
  }

  std::printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
