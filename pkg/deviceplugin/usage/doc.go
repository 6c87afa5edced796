// Package usage measures what the GPUs of the plugin's node are doing and who uses them: per
// card, the memory in use and the utilization from NVML; per container, the GPU memory its
// processes use, against what it asked. NVML lists each card's compute processes by host PID;
// a PID is mapped to its container by the PID's cgroup (/proc/<pid>/cgroup names the pod's UID
// and the container's ID under the kubelet's kubepods hierarchy, with the cgroupfs or the
// systemd driver, cgroup v1 or v2; or, where the kubelet makes no pod cgroups, the container's
// ID alone), and the container ID to its pod and container name by the pods' status. A
// container that uses more than it asked is reported by a gauge and by one Warning event on its
// pod (ReasonOverRequest).
//
// Where the node enforces limits with HAMi-core, the sampler also polices them from the host,
// where nothing in a container can lie (EscapePolicy, escape.go): at every reading, a container
// with a limit escapes it on a card when its processes there use more than the limit plus a
// CUDA context allowance per process (EscapeOverLimit), or when one of its GPU processes does
// not map the HAMi-core library (EscapeNoHAMiCore: /proc/<pid>/maps, compared with the host
// file's device and inode). An escape gets a Warning event (ReasonLimitEscaped) and a counter,
// and, with EscapeActionKill, its processes on the card get SIGKILL through their /proc/<pid>
// entry (ProcKiller), after their cgroup is read again through it, so a reused PID is not hit.
// It happens within one reading period of the overrun.
package usage
