// Package usage measures what the GPUs of the plugin's node are doing and who uses them: per
// card, the memory in use and the utilization from NVML; per container, the GPU memory its
// processes use, against what it asked. NVML lists each card's compute processes by host PID;
// a PID is mapped to its container by the PID's cgroup (/proc/<pid>/cgroup names the pod's UID
// and the container's ID under the kubelet's kubepods hierarchy, with the cgroupfs or the
// systemd driver, cgroup v1 or v2), and the container ID to its pod and container name by the
// pods' status. A container that uses more than it asked is reported by a gauge and by one
// Warning event on its pod.
package usage
