// What learning when frames return would cost, the way bytehound does it: each
// frame a stack walk passes for the first time has its return address replaced by a
// trampoline's (the real one kept on a shadow stack), so that a later walk stops at
// the first patched frame and never compares the frames outward of it; each patched
// frame then returns through the trampoline, which the processor's return-address
// predictor cannot foresee.
//
// A loop of "allocations", each at the end of a chain of three new frames under a
// fixed outer frame (eight different middle functions, picked at random, so that the
// trampoline's jump goes to varying places, as in a program). Three ways, each timed
// the same way: no walk; a frame-pointer walk of the new frames up to the outer one;
// that walk patching each frame it passes. Prints nanoseconds per allocation and per
// new frame. x86-64 only; build with frame pointers (scripts/bench-return-patch.sh).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if !defined(__x86_64__)
#error "x86-64 only"
#endif

uintptr_t shadow[1 << 12];
long shadow_top;
extern char trampoline[];

// Reached by a patched frame's `ret`: pops the real return address and jumps to it.
// r10 and r11 are free at a return in the System V ABI (not return registers).
__asm__(".text\n"
        ".globl trampoline\n"
        "trampoline:\n"
        "  mov shadow_top(%rip), %r11\n"
        "  dec %r11\n"
        "  mov %r11, shadow_top(%rip)\n"
        "  lea shadow(%rip), %r10\n"
        "  mov (%r10,%r11,8), %r11\n"
        "  jmp *%r11\n");

enum way { NONE, WALK, PATCH };
static volatile enum way way;
static uintptr_t *root; // the outer frame: walks stop there
static volatile uintptr_t sink;

// The allocation: walks its callers' frames up to the root (or to the first patched
// one), patching them when asked.
__attribute__((noinline)) void hook(void) {
  enum way w = way;
  if (w == NONE)
    return;
  uintptr_t *found[64];
  int n = 0;
  uintptr_t *f = (uintptr_t *)((uintptr_t *)__builtin_frame_address(0))[0];
  while (f != root && n < 64 && f[1] != (uintptr_t)trampoline) {
    found[n++] = f;
    f = (uintptr_t *)f[0];
  }
  if (w == PATCH) {
    // Outermost first, so that the shadow stack pops in the order frames return.
    for (int k = n - 1; k >= 0; k--) {
      shadow[shadow_top++] = found[k][1];
      found[k][1] = (uintptr_t)trampoline;
    }
  } else {
    sink += n;
  }
}

__attribute__((noinline)) uintptr_t inner(uintptr_t x) {
  hook();
  return x * 3 + 1;
}

__attribute__((noinline)) uintptr_t leaf2(uintptr_t x) { return inner(x ^ 5) + 7; }

#define MID(k)                                                                   \
  __attribute__((noinline)) uintptr_t mid##k(uintptr_t x) {                      \
    return leaf2(x + k) * (k + 2);                                               \
  }
MID(0) MID(1) MID(2) MID(3) MID(4) MID(5) MID(6) MID(7)
static uintptr_t (*const mids[8])(uintptr_t) = {mid0, mid1, mid2, mid3,
                                                mid4, mid5, mid6, mid7};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// The outer frame: `n` allocations, each through a randomly picked middle function.
__attribute__((noinline)) double run(long n, uint64_t seed) {
  root = (uintptr_t *)__builtin_frame_address(0);
  double t0 = now();
  uintptr_t acc = 0;
  for (long i = 0; i < n; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    acc += mids[seed & 7](i);
  }
  sink += acc;
  return now() - t0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  int rounds = argc > 2 ? atoi(argv[2]) : 15;
  double t[3][rounds];
  for (int r = 0; r < rounds; r++)
    for (int w = 0; w < 3; w++) {
      way = (enum way)w;
      t[w][r] = run(n, 0x9e3779b97f4a7c15ull + r) / n * 1e9;
    }
  double med[3];
  for (int w = 0; w < 3; w++) {
    qsort(t[w], rounds, sizeof t[w][0], cmp);
    med[w] = t[w][rounds / 2];
  }
  const int frames = 3; // new frames per allocation: mid, leaf2, inner
  printf("| way | ns per allocation (median of %d rounds of %ld) | added per new frame |\n",
         rounds, n);
  printf("|---|---:|---:|\n");
  printf("| no walk | %.2f | |\n", med[NONE]);
  printf("| walk of the %d new frames | %.2f | %+.2f ns |\n", frames, med[WALK],
         (med[WALK] - med[NONE]) / frames);
  printf("| walk, patching each new frame | %.2f | %+.2f ns over the walk |\n", med[PATCH],
         (med[PATCH] - med[WALK]) / frames);
  return shadow_top != 0; // every patched frame returned through the trampoline
}
