// Records which pages of a program's code it runs after its initial sync: hack/code-order's probe.
//
// LD_PRELOADed into reloader (release build) with TOUCHED_CODE_OUT=<file>. reloader pages its
// code out once its caches synced (observe::memory::release_cold_code, with madvise
// MADV_PAGEOUT); when that call reaches the executable mapping, this library makes the mapping
// inaccessible instead, and a SIGSEGV handler (here, outside that mapping) makes each page
// accessible again the first time any thread touches it, appending the page's file offset
// (8 bytes, native endian) to the file. So the file lists, page by page, the code the steady
// state runs, whatever the kernel would have mapped around it. Concurrent processes may share
// the file (O_APPEND); duplicates are expected.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static uintptr_t text_start, text_end, text_offset;
static int out = -1;
static struct sigaction previous;

static void on_fault(int sig, siginfo_t *info, void *context) {
  uintptr_t address = (uintptr_t)info->si_addr;
  if (address < text_start || address >= text_end) {
    // Not ours: the previous handler (Rust's stack-overflow guard) or the default takes it.
    sigaction(SIGSEGV, &previous, NULL);
    return;
  }
  uintptr_t page = address & ~(uintptr_t)4095;
  mprotect((void *)page, 4096, PROT_READ | PROT_EXEC);
  uint64_t offset = page - text_start + text_offset;
  if (write(out, &offset, sizeof offset) != sizeof offset) {
    // Nothing to do from a signal handler: the page is accessible again either way.
  }
  (void)sig;
  (void)context;
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

int madvise(void *address, size_t length, int advice) {
  static int (*real_madvise)(void *, size_t, int);
  if (!real_madvise) real_madvise = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
  const char *path = getenv("TOUCHED_CODE_OUT");
  uintptr_t start, end, offset;
  if (advice != MADV_PAGEOUT || !path || out >= 0 ||
      !executable_mapping((uintptr_t)address, &start, &end, &offset)) {
    return real_madvise(address, length, advice);
  }
  out = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return real_madvise(address, length, advice);
  text_start = start, text_end = end, text_offset = offset;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &previous);
  return mprotect((void *)start, end - start, PROT_NONE);
}
