// gpu-check workload (CUDA C), used where PyTorch is not installed: run by hack/gpucheck as a
// "container" (mount namespace with the share-plugin's mounts, exactly its env). Prints
// GPUCHECK key=value lines (hack/gpucheck/report.go), the same as workload.py.
//   alloc limits    measure the limit HAMi-core applies
//   alloc context   start CUDA only, then wait for stdin to close
//   alloc maxalloc  start CUDA, wait for "go", then find the largest allocation that succeeds
//                   (bisection in STEP bytes), then wait for stdin to close
// Build: nvcc -O2 -o alloc alloc.cu
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void out_str(const char *key, const char *value) {
  printf("GPUCHECK %s=%s\n", key, value);
  fflush(stdout);
}

static void out_u64(const char *key, unsigned long long value) {
  printf("GPUCHECK %s=%llu\n", key, value);
  fflush(stdout);
}

// limit_bytes reads CUDA_DEVICE_MEMORY_LIMIT_0 as HAMi-core does: <n>m, <n>g, <n>k or bytes.
static unsigned long long limit_bytes(void) {
  const char *v = getenv("CUDA_DEVICE_MEMORY_LIMIT_0");
  if (v == NULL || *v == '\0') return 0;
  unsigned long long n = strtoull(v, NULL, 10);
  switch (v[strlen(v) - 1]) {
    case 'g': case 'G': return n << 30;
    case 'm': case 'M': return n << 20;
    case 'k': case 'K': return n << 10;
  }
  return n;
}

// try_alloc allocates size bytes and prints key=ok|oom|error; it returns the memory or NULL.
static void *try_alloc(const char *key, size_t size) {
  char name[64];
  snprintf(name, sizeof name, "%s_bytes", key);
  out_u64(name, size);
  void *p = NULL;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaSuccess) err = cudaMemset(p, 1, size);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) {
    out_str(key, "ok");
    return p;
  }
  out_str(key, err == cudaErrorMemoryAllocation ? "oom" : "error");
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
  snprintf(name, sizeof name, "%s_error", key);
  out_str(name, msg);
  cudaGetLastError();  // clear it
  if (p != NULL) cudaFree(p);
  return NULL;
}

// STEP is the resolution of the largest allocation (workload.py uses the same).
#define STEP (16ULL << 20)

// alloc_fits reports whether size bytes can be allocated and written: 1 yes, 0 out of memory,
// -1 another error (in *err). The memory is freed again.
static int alloc_fits(size_t size, cudaError_t *err) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, size);
  if (e == cudaSuccess) e = cudaMemset(p, 1, size);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (p != NULL) cudaFree(p);
  if (e == cudaSuccess) return 1;
  cudaGetLastError();  // clear it
  *err = e;
  return e == cudaErrorMemoryAllocation ? 0 : -1;
}

// max_alloc prints the largest multiple of STEP up to hi that alloc_fits, by bisection (as
// workload.py's largest_fit).
static void max_alloc(unsigned long long hi) {
  cudaError_t err = cudaSuccess;
  hi = hi / STEP * STEP;
  unsigned long long lo = 0;
  int r = hi > 0 ? alloc_fits((size_t)hi, &err) : 0;
  if (r == 1) lo = hi;
  while (r >= 0 && lo < hi && hi - lo > STEP) {
    unsigned long long mid = (lo + hi) / 2 / STEP * STEP;
    if (mid <= lo) mid = lo + STEP;
    r = alloc_fits((size_t)mid, &err);
    if (r == 1) lo = mid;
    else if (r == 0) hi = mid;
  }
  if (r < 0) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
    out_str("max_alloc_error", msg);
    return;
  }
  out_u64("max_alloc_bytes", lo);
}

// nvml_total prints the card's total as nvidia-smi inside reports it, in MiB.
static void nvml_total(void) {
  FILE *f = popen("nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits 2>&1", "r");
  if (f == NULL) {
    out_str("nvml_error", "popen nvidia-smi failed");
    return;
  }
  char line[256] = "";
  if (fgets(line, sizeof line, f) == NULL) line[0] = '\0';
  int status = pclose(f);
  line[strcspn(line, "\r\n")] = '\0';
  if (status == 0 && line[0] != '\0') {
    out_str("nvml_total_mib", line);
  } else {
    char msg[320];
    snprintf(msg, sizeof msg, "nvidia-smi status %d: %s", status, line);
    out_str("nvml_error", msg);
  }
}

static void wait_line(void) {
  int c;
  while ((c = getchar()) != EOF && c != '\n') {
  }
}

static void wait_eof(void) {
  while (getchar() != EOF) {
  }
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "limits";
  int rt = 0;
  char buf[64];
  cudaRuntimeGetVersion(&rt);
  out_str("runtime", "cuda-c");
  snprintf(buf, sizeof buf, "%d.%d", rt / 1000, (rt % 1000) / 10);
  out_str("cuda_runtime", buf);
  size_t free_b = 0, total_b = 0;
  cudaError_t err = cudaSetDevice(0);
  if (err == cudaSuccess) err = cudaMemGetInfo(&free_b, &total_b);
  if (err != cudaSuccess) {
    snprintf(buf, sizeof buf, "cuda init: %s", cudaGetErrorName(err));
    out_str("fatal", buf);
    return 1;
  }
  out_u64("total_bytes", total_b);
  out_u64("free_bytes", free_b);
  if (strcmp(mode, "context") == 0) {
    out_str("ready", "1");
    wait_eof();
    return 0;
  }
  if (strcmp(mode, "maxalloc") == 0) {
    out_str("holding", "1");
    wait_line();  // "go": the context was measured
    max_alloc(total_b);
    out_str("ready", "1");
    wait_eof();
    return 0;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) out_u64("props_total_bytes", prop.totalGlobalMem);
  unsigned long long limit = limit_bytes();
  if (limit == 0) limit = total_b;
  void *held = try_alloc("alloc_within", (size_t)(limit * 0.6));
  out_str("holding", "1");
  wait_line();  // "go": the other container holds its memory too
  void *past = try_alloc("alloc_past", (size_t)(limit * 1.5));
  if (past != NULL) cudaFree(past);
  nvml_total();
  out_str("ready", "1");
  wait_eof();
  if (held != NULL) cudaFree(held);
  return 0;
}
