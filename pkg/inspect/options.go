package inspect

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// Output formats accepted by -o.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

const example = `  # Memory per card of every GPU-sharing node, and the cluster total
  kubectl inspect gpushare

  # Pods per card of two nodes
  kubectl inspect gpushare -d node-a node-b

  # Only the pods of namespace team-a in the details (totals still count every pod)
  kubectl inspect gpushare -d -n team-a

  # Card model, UUID and health; machine-readable output
  kubectl inspect gpushare -o wide
  kubectl inspect gpushare -o yaml`

// Options are the settings of one `kubectl inspect gpushare` run.
type Options struct {
	configFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	names         contract.Names
	details       bool
	output        string
	allNamespaces bool
	draDriver     string

	// Set by Complete.
	nodeNames []string
	namespace string
	client    kubernetes.Interface
}

// Option customises Options, e.g. for tests.
type Option func(*Options)

// WithClient makes the command use client instead of one built from the kubeconfig flags.
func WithClient(client kubernetes.Interface) Option {
	return func(o *Options) { o.client = client }
}

// NewOptions returns Options with the default contract names and kubeconfig flags.
func NewOptions(streams genericiooptions.IOStreams, opts ...Option) *Options {
	o := &Options{configFlags: genericclioptions.NewConfigFlags(true), IOStreams: streams, names: contract.DefaultNames(),
		draDriver: DefaultDRADriver}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// NewCmd returns the cobra command of `kubectl inspect gpushare`.
func NewCmd(streams genericiooptions.IOStreams, opts ...Option) *cobra.Command {
	o := NewOptions(streams, opts...)
	cmd := &cobra.Command{
		Use:           "kubectl-inspect-gpushare [NODE...] [flags]",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl inspect gpushare"},
		Short:         "Show GPU memory shared by pods, per node and card",
		Example:       example,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.Complete(c, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags registers the command's flags, the kubeconfig flags and the contract names.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVarP(&o.details, "details", "d", false, "list the pods on each node with their memory per card")
	fl.StringVarP(&o.output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	fl.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list pods of all namespaces in the details (the default; overrides -n)")
	fl.StringVar(&o.draDriver, "dra-driver", o.draDriver, "the DRA driver whose ResourceSlices and ResourceClaims show DRA nodes (read when the API server serves resource.k8s.io/v1)")
	o.configFlags.AddFlags(fl)
	gofs := flag.NewFlagSet("gpushare", flag.ContinueOnError)
	o.names.AddFlags(gofs)
	addVerbosity(gofs)
	fl.AddGoFlagSet(gofs)
}

// addVerbosity adds klog's -v alone (client-go logs each request at -v=6), not klog's other
// flags.
func addVerbosity(fs *flag.FlagSet) {
	all := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(all)
	if v := all.Lookup("v"); v != nil {
		fs.Var(v.Value, v.Name, v.Usage)
	}
}

// Complete takes the node names from args, the namespace from an explicit -n, and builds the
// client unless one was given.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	o.nodeNames = dedupe(args)
	if cmd.Flags().Changed("namespace") && !o.allNamespaces && o.configFlags.Namespace != nil {
		o.namespace = *o.configFlags.Namespace
	}
	if o.client != nil {
		return nil
	}
	cfg, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	o.client = client
	return nil
}

// Validate checks the output format and the contract names.
func (o *Options) Validate() error {
	switch o.output {
	case outputTable, outputWide, outputJSON, outputYAML:
	default:
		return fmt.Errorf("%w: --output %q: use wide, json or yaml", ErrInvalidOptions, o.output)
	}
	if o.draDriver == "" {
		return fmt.Errorf("%w: --dra-driver must not be empty", ErrInvalidOptions)
	}
	if err := o.names.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

// Run reads the cluster, computes the report with the extender's cache and prints it.
func (o *Options) Run(ctx context.Context) error {
	nodes, pods, err := Fetch(ctx, o.client, o.nodeNames)
	if err != nil {
		return err
	}
	dra, err := FetchDRA(ctx, o.client, o.draDriver, o.nodeNames)
	if err != nil {
		return err
	}
	c := cache.New(o.names, klog.FromContext(ctx))
	FeedDRA(ctx, c, o.draDriver, o.names, dra)
	r := BuildReport(o.names, c, nodes, pods, o.namespace)
	if err := o.checkNamed(&r); err != nil {
		return err
	}
	if len(r.Nodes) == 0 {
		if err := o.explainEmpty(); err != nil {
			return err
		}
		if o.output != outputJSON && o.output != outputYAML {
			return nil
		}
	}
	return o.print(o.Out, &r)
}

func (o *Options) print(out io.Writer, r *Report) error {
	switch {
	case o.output == outputJSON:
		return PrintJSON(out, r)
	case o.output == outputYAML:
		return PrintYAML(out, r)
	case o.details:
		return PrintDetails(out, r, o.output == outputWide)
	case o.output == outputWide:
		return PrintWide(out, r)
	}
	return PrintTable(out, r)
}

// checkNamed fails when a node named on the command line shares no GPUs.
func (o *Options) checkNamed(r *Report) error {
	var missing []string
	for _, name := range o.nodeNames {
		if !slices.ContainsFunc(r.Nodes, func(n NodeReport) bool { return n.Name == name }) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %q: it has no allocatable %s, no %s annotation and no pod holding %s",
			ErrNotSharing, missing, o.names.Resource, o.names.NodeGPUsAnnotation, o.names.Resource)
	}
	return nil
}

// explainEmpty says on stderr that no node shares GPUs, and why a node would.
func (o *Options) explainEmpty() error {
	_, err := io.WriteString(o.ErrOut, "No GPU-sharing nodes found: no node has allocatable "+string(o.names.Resource)+
		" or the "+o.names.NodeGPUsAnnotation+" annotation (is the gpushare device plugin running, and are --resource-name/--node-gpus-annotation those it uses?)\n")
	return err
}

// dedupe drops repeated names, keeping the first occurrence's order.
func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
