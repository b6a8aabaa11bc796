// Records which functions of a program's code it runs after its initial sync: hack/code-order's
// probe.
//
// LD_PRELOADed into reloader (release build) with TOUCHED_CODE_OUT=<file> and
// TOUCHED_CODE_ENTRIES=<file> (the file offsets of the binary's function entries, one decimal
// number per line). reloader pages its code out once its caches synced
// (observe::memory::release_cold_code, with madvise MADV_PAGEOUT); when that call reaches the
// executable mapping, this library arms two recorders instead, and each appends file offsets
// (8 bytes, native endian) to the output:
//
// - every function entry gets a breakpoint (int3); the SIGTRAP handler puts the original byte
//   back, records the entry and resumes there. So each function that is called is recorded once.
// - the mapping is made inaccessible, and again every 100 ms; the SIGSEGV handler makes the page
//   accessible and records the exact address that touched it. This catches functions that are
//   never entered again but keep running: a thread's base loop returning into its body.
//
// Both handlers live here, outside that mapping. Concurrent processes may share the output
// (O_APPEND); duplicates are expected. A thread that blocks SIGSEGV or SIGTRAP is killed by its
// first touch; as shipped, reloader has none.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static uintptr_t text_start, text_end, text_offset;
static int out = -1;
static struct sigaction previous_segv, previous_trap;
// Function entries (addresses, ascending) and the byte each breakpoint replaced.
static uintptr_t *entries;
static uint8_t *replaced;
static size_t entry_count;

static void record(uintptr_t address) {
  uint64_t offset = address - text_start + text_offset;
  if (write(out, &offset, sizeof offset) != sizeof offset) {
    // Nothing to do from a signal handler: the program goes on either way.
  }
}

static void on_fault(int sig, siginfo_t *info, void *context) {
  uintptr_t address = (uintptr_t)info->si_addr;
  if (address < text_start || address >= text_end) {
    // Not ours: the previous handler (Rust's stack-overflow guard) or the default takes it.
    sigaction(SIGSEGV, &previous_segv, NULL);
    return;
  }
  // Writable too: the breakpoint handler puts bytes back on this page.
  mprotect((void *)(address & ~(uintptr_t)4095), 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
  record(address);
  (void)sig;
  (void)context;
}

static void on_breakpoint(int sig, siginfo_t *info, void *context) {
  ucontext_t *registers = context;
  uintptr_t address = (uintptr_t)registers->uc_mcontext.gregs[REG_RIP] - 1;
  size_t low = 0, high = entry_count;
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    if (entries[middle] < address) low = middle + 1;
    else high = middle;
  }
  if (low == entry_count || entries[low] != address) {
    // Not one of ours: let the previous disposition take the next one.
    sigaction(SIGTRAP, &previous_trap, NULL);
    raise(SIGTRAP);
    return;
  }
  // Another thread may have put it back already; then this one only resumes.
  if (*(volatile uint8_t *)address == 0xCC) *(volatile uint8_t *)address = replaced[low];
  registers->uc_mcontext.gregs[REG_RIP] = (greg_t)address;
  record(address);
  (void)sig;
  (void)info;
}

static void *reprotect(void *unused) {
  for (;;) {
    usleep(100 * 1000);
    mprotect((void *)text_start, text_end - text_start, PROT_NONE);
  }
  return unused;
}

// The executable mapping of this program that contains `address`, from /proc/self/maps.
static int executable_mapping(uintptr_t address, uintptr_t *start, uintptr_t *end, uintptr_t *offset) {
  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, maps)) {
    unsigned long s, e, o;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %lx", &s, &e, perms, &o) == 4 && perms[2] == 'x' && address >= s &&
        address < e) {
      *start = s, *end = e, *offset = o;
      found = 1;
    }
  }
  fclose(maps);
  return found;
}

// Reads the entries' file offsets (ascending, as hack/code-order writes them) into addresses
// inside the mapping; returns how many.
static size_t read_entries(const char *path) {
  FILE *file = fopen(path, "r");
  if (!file) return 0;
  size_t capacity = 1 << 20;
  entries = mmap(NULL, capacity * sizeof *entries, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  replaced = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (entries == MAP_FAILED || replaced == MAP_FAILED) {
    fclose(file);
    return 0;
  }
  size_t count = 0;
  unsigned long long offset;
  while (count < capacity && fscanf(file, "%llu", &offset) == 1) {
    if (offset < text_offset) continue;
    uintptr_t address = text_start + (offset - text_offset);
    if (address < text_end && (count == 0 || address > entries[count - 1])) entries[count++] = address;
  }
  fclose(file);
  return count;
}

int madvise(void *address, size_t length, int advice) {
  static int (*real_madvise)(void *, size_t, int);
  if (!real_madvise) real_madvise = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
  const char *path = getenv("TOUCHED_CODE_OUT"), *entries_path = getenv("TOUCHED_CODE_ENTRIES");
  uintptr_t start, end, offset;
  if (advice != MADV_PAGEOUT || !path || !entries_path || out >= 0 ||
      !executable_mapping((uintptr_t)address, &start, &end, &offset)) {
    return real_madvise(address, length, advice);
  }
  text_start = start, text_end = end, text_offset = offset;
  entry_count = read_entries(entries_path);
  out = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0 || entry_count == 0) {
    fprintf(stderr, "touched-code: cannot arm (output %s, %zu entries from %s)\n", path, entry_count, entries_path);
    abort();
  }

  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  action.sa_sigaction = on_fault;
  sigaction(SIGSEGV, &action, &previous_segv);
  action.sa_sigaction = on_breakpoint;
  sigaction(SIGTRAP, &action, &previous_trap);

  // This thread is running this library's code, not the mapping's, while the bytes change.
  mprotect((void *)start, end - start, PROT_READ | PROT_WRITE);
  for (size_t i = 0; i < entry_count; i++) replaced[i] = *(uint8_t *)entries[i];
  // Another thread may hit a breakpoint as soon as it is written: its byte must be saved first.
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  for (size_t i = 0; i < entry_count; i++) *(volatile uint8_t *)entries[i] = 0xCC;
  mprotect((void *)start, end - start, PROT_NONE);
  pthread_t thread;
  pthread_create(&thread, NULL, reprotect, NULL);
  return 0;
}
