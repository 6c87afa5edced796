# gpu-check workload (PyTorch): run by hack/gpucheck as a "container" (mount namespace with the
# share-plugin's mounts, exactly its env). Prints GPUCHECK key=value lines (hack/gpucheck/report.go).
#   python3 workload.py limits    measure the limit HAMi-core applies (see hack/gpucheck/alloc.cu)
#   python3 workload.py context   start CUDA only, then wait for stdin to close
#   python3 workload.py maxalloc  start CUDA, wait for "go", then find the largest allocation that
#                                 succeeds (bisection in STEP bytes), then wait for stdin to close
import os
import subprocess
import sys


def out(key, value):
    print("GPUCHECK %s=%s" % (key, " ".join(str(value).split())), flush=True)


def limit_bytes():
    """CUDA_DEVICE_MEMORY_LIMIT_0 as HAMi-core reads it: <n>m, <n>g, <n>k or bytes."""
    v = os.environ.get("CUDA_DEVICE_MEMORY_LIMIT_0", "").strip()
    mult = {"g": 1 << 30, "m": 1 << 20, "k": 1 << 10}
    try:
        if v and v[-1].lower() in mult:
            return int(v[:-1]) * mult[v[-1].lower()]
        return int(v) if v else 0
    except ValueError:
        return 0


def oom_classes(torch):
    classes = []
    for owner, name in ((torch, "OutOfMemoryError"), (torch.cuda, "OutOfMemoryError")):
        cls = getattr(owner, name, None)
        if cls is not None:
            classes.append(cls)
    return tuple(classes)


def try_alloc(torch, key, size):
    """Allocates size bytes on card 0; prints key=ok|oom|error. Returns the tensor or None."""
    out(key + "_bytes", size)
    try:
        t = torch.empty(size, dtype=torch.uint8, device="cuda:0")
        t.fill_(1)
        torch.cuda.synchronize()
        out(key, "ok")
        return t
    except oom_classes(torch) as e:
        out(key, "oom")
        out(key + "_error", "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    except Exception as e:  # noqa: BLE001 - any other failure is reported, not raised
        msg = str(e).splitlines()[0] if str(e) else ""
        out(key, "oom" if "out of memory" in msg.lower() else "error")
        out(key + "_error", "%s: %s" % (type(e).__name__, msg))
    return None


# STEP is the resolution of the largest allocation (alloc.cu uses the same).
STEP = 16 << 20


def largest_fit(fits, hi, step=STEP):
    """The largest multiple of step from 0 to hi for which fits(size) is true, by bisection.
    fits must be monotone (a size fits, so does every smaller one); 0 when none fits."""
    hi = hi // step * step
    if hi <= 0:
        return 0
    if fits(hi):
        return hi
    lo = 0  # nothing is taken to fit
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        if mid <= lo:
            mid = lo + step
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def alloc_fits(torch, size):
    """Whether size bytes can be allocated and written on card 0; they are freed again (and
    PyTorch's cache emptied, so that the next try starts from the same state)."""
    try:
        t = torch.empty(size, dtype=torch.uint8, device="cuda:0")
        t.fill_(1)
        torch.cuda.synchronize()
        del t
        torch.cuda.empty_cache()
        return True
    except oom_classes(torch):
        torch.cuda.empty_cache()
        return False
    except RuntimeError as e:
        if "out of memory" not in str(e).lower():
            raise
        torch.cuda.empty_cache()
        return False


def max_alloc(torch, total):
    """Prints the largest allocation that succeeds, up to the card's size as CUDA reports it
    (the limit, under HAMi-core)."""
    try:
        out("max_alloc_bytes", largest_fit(lambda size: alloc_fits(torch, size), total))
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out("max_alloc_error", "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))


def nvml_total():
    """The card's total as NVML inside reports it (nvidia-smi, else pynvml), in MiB."""
    try:
        r = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0 and r.stdout.strip():
            out("nvml_total_mib", r.stdout.strip().splitlines()[0].strip())
            return
        out("nvml_error", "nvidia-smi exit %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()[:200]))
        return
    except FileNotFoundError:
        pass
    except Exception as e:  # noqa: BLE001
        out("nvml_error", "nvidia-smi: %s" % e)
        return
    try:
        import pynvml
        pynvml.nvmlInit()
        mem = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
        out("nvml_total_mib", mem.total >> 20)
    except Exception as e:  # noqa: BLE001
        out("nvml_error", "no nvidia-smi, pynvml: %s" % e)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "limits"
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        out("fatal", "import torch: %s" % e)
        return 1
    out("runtime", "torch-" + torch.__version__)
    out("cuda_runtime", torch.version.cuda)
    try:
        free, total = torch.cuda.mem_get_info(0)
    except Exception as e:  # noqa: BLE001
        out("fatal", "cuda init: %s: %s" % (type(e).__name__, e))
        return 1
    out("total_bytes", total)
    out("free_bytes", free)
    if mode == "context":
        out("ready", 1)
        sys.stdin.read()
        return 0
    if mode == "maxalloc":
        out("holding", 1)
        sys.stdin.readline()  # "go": the context was measured
        max_alloc(torch, total)
        out("ready", 1)
        sys.stdin.read()
        return 0
    out("props_total_bytes", torch.cuda.get_device_properties(0).total_memory)
    limit = limit_bytes() or total
    held = try_alloc(torch, "alloc_within", int(limit * 0.6))
    out("holding", 1)
    sys.stdin.readline()  # "go": the other container holds its memory too
    past = try_alloc(torch, "alloc_past", int(limit * 1.5))
    del past
    nvml_total()
    out("ready", 1)
    sys.stdin.read()
    del held
    return 0


if __name__ == "__main__":
    sys.exit(main())
