package usage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	uid = "5f0c7e4a-1b2c-4d3e-8f90-123456789abc"
)

func TestParseCgroup(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    Owner
		ok      bool
	}{
		{"cgroup v2, systemd driver, containerd",
			"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f0c7e4a_1b2c_4d3e_8f90_123456789abc.slice/cri-containerd-" + cid + ".scope\n",
			Owner{PodUID: uid, ContainerID: cid}, true},
		{"cgroup v2, cgroupfs driver",
			"0::/kubepods/besteffort/pod" + uid + "/" + cid + "\n",
			Owner{PodUID: uid, ContainerID: cid}, true},
		{"cgroup v2, guaranteed pod (no QoS folder), CRI-O",
			"0::/kubepods.slice/kubepods-pod5f0c7e4a_1b2c_4d3e_8f90_123456789abc.slice/crio-" + cid + ".scope\n",
			Owner{PodUID: uid, ContainerID: cid}, true},
		{"cgroup v1, the memory line names the pod",
			"12:pids:/\n11:memory:/kubepods/burstable/pod" + uid + "/" + cid + "\n1:name=systemd:/kubepods/burstable/pod" + uid + "/" + cid + "\n",
			Owner{PodUID: uid, ContainerID: cid}, true},
		{"the pod's sandbox-level cgroup: pod only",
			"0::/kubepods/burstable/pod" + uid + "\n",
			Owner{PodUID: uid}, true},
		{"no pod cgroups (kubelet --cgroups-per-qos=false), containerd's default path",
			"4:memory:/k8s.io/" + cid + "\n0::/k8s.io/" + cid + "\n",
			Owner{ContainerID: cid}, true},
		{"no pod cgroups, container under the root", "0::/" + cid + "\n", Owner{ContainerID: cid}, true},
		{"a host process", "0::/system.slice/nvidia-persistenced.service\n", Owner{}, false},
		{"a user session", "0::/user.slice/user-1000.slice/session-3.scope\n", Owner{}, false},
		{"garbage", "not a cgroup file", Owner{}, false},
		{"empty", "", Owner{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseCgroup(tt.content)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("owner (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProcReader(t *testing.T) {
	root := t.TempDir()
	write := func(pid, content string) {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "cgroup"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("42", "0::/kubepods/burstable/pod"+uid+"/"+cid+"\n")
	write("43", "0::/system.slice/sshd.service\n")
	r := ProcReader{Root: root}
	got, err := r.OwnerOf(42)
	if err != nil || got != (Owner{PodUID: uid, ContainerID: cid}) {
		t.Errorf("OwnerOf(42) = %+v, %v", got, err)
	}
	for _, pid := range []uint32{43, 44} { // a host process; a process that has exited
		if _, err := r.OwnerOf(pid); !errors.Is(err, ErrNotInPod) {
			t.Errorf("OwnerOf(%d) error = %v, want ErrNotInPod", pid, err)
		}
	}
}
