package feed_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/cache/feed"
)

// TestEachNodePage: nodes are listed feed.PodPageSize a page, each page handed over before the
// next is asked for, with the selectors given; a failed page is the caller's error.
func TestEachNodePage(t *testing.T) {
	const n = 1100
	tests := []struct {
		name     string
		failAt   string // the continue token whose page fails; "" for none
		wantSeen []int  // page sizes handed over
		wantErr  bool
	}{
		{name: "three pages", wantSeen: []int{500, 500, 100}},
		{name: "second page fails", failAt: "500", wantSeen: []int{500}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []metav1.ListOptions
			handed := 0
			client := fake.NewClientset()
			client.PrependReactor("list", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
				opts := action.(clienttesting.ListActionImpl).ListOptions
				asked = append(asked, opts)
				if tt.failAt != "" && opts.Continue == tt.failAt {
					return true, nil, errors.New("etcd unavailable")
				}
				if want := 500 * (len(asked) - 1); handed != want {
					t.Errorf("page %d asked for with %d nodes handed over, want %d", len(asked), handed, want)
				}
				from := 0
				if opts.Continue != "" {
					if _, err := fmt.Sscan(opts.Continue, &from); err != nil {
						return true, nil, err
					}
				}
				to := min(from+int(opts.Limit), n)
				list := &v1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(9 + len(asked))}}
				for i := from; i < to; i++ {
					list.Items = append(list.Items, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%04d", i), Labels: map[string]string{"gpu": "true"}}})
				}
				if to < n {
					list.Continue = fmt.Sprint(to)
				}
				return true, list, nil
			})
			var seen []int
			next := 0
			rv, err := feed.EachNodePage(context.Background(), client.CoreV1().Nodes(), metav1.ListOptions{LabelSelector: "gpu=true"}, func(nodes []v1.Node) error {
				seen = append(seen, len(nodes))
				for _, node := range nodes {
					if want := fmt.Sprintf("n%04d", next); node.Name != want {
						t.Errorf("node %s handed over, want %s", node.Name, want)
					}
					next++
				}
				handed += len(nodes)
				return nil
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("EachNodePage() error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("pages handed over (-want,+got):\n%s", diff)
			}
			for _, opts := range asked {
				if opts.Limit != feed.PodPageSize || opts.LabelSelector != "gpu=true" {
					t.Errorf("list asked with %+v, want limit %d and the label selector", opts, feed.PodPageSize)
				}
			}
			if !tt.wantErr && rv != "10" {
				t.Errorf("resource version %q, want the first page's (10)", rv)
			}
		})
	}
}
