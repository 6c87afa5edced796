package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// fenceManifests are what --fence installs: the extender's RBAC and its admission policies,
// the fence (extender-fence.yaml) among them.
var fenceManifests = []string{"config/extender/rbac.yaml", "config/admission/extender-pods.yaml",
	"config/admission/extender-leases.yaml", "config/admission/extender-fence.yaml"}

// installFence applies fenceManifests to the run's cluster and returns the flag that makes an
// extender act as its service account, so that its writes go through the policies.
func (b *bench) installFence(ctx context.Context) (string, error) {
	files := make([]string, len(fenceManifests))
	for i, f := range fenceManifests {
		files[i] = filepath.Join(b.opts.Root, f)
	}
	if err := b.c.Apply(ctx, files...); err != nil {
		return "", err
	}
	user, groups := framework.ServiceAccountUser("kube-system", "gpushare-extender")
	kc, err := b.c.KubeconfigAs(user, groups, nil)
	if err != nil {
		return "", err
	}
	b.fenceKubeconfig = kc
	return "--kubeconfig=" + kc, nil
}

// waitFence waits until the fence policy refuses a dry-run Binding of the extender's account
// under a token that is not the Lease's: the policies are in force (the Lease, their param,
// exists once a replica leads).
func (b *bench) waitFence(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.fenceKubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", b.fenceKubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client as the extender: %w", err)
	}
	probe := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "fence-probe", Annotations: map[string]string{contract.AnnotationFence: "probe/0"}},
		Target: v1.ObjectReference{Kind: "Node", Name: "none"}}
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		last = client.CoreV1().Pods("default").Bind(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		var status apierrors.APIStatus
		if apierrors.IsForbidden(last) && errors.As(last, &status) && strings.Contains(status.Status().Message, scheduler.FencePolicy) {
			logf("fence: in force; the extender acts as its service account")
			return nil
		}
	}
	return fmt.Errorf("the fence policy never refused a stale token (last answer: %v)", last)
}
