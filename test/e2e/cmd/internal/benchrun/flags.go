package benchrun

import "flag"

// Flags are the flags the benchmark commands share. A command embeds them in its options and
// hands them to its Bench, which registers and parses them.
type Flags struct {
	// Dir holds the clusters' data and logs; empty means a temporary folder, removed at the end.
	Dir string
	// Extender is a prebuilt extender binary; empty builds this checkout's.
	Extender string
	// ExtenderArgs are more flags for the extender, separated by spaces.
	ExtenderArgs string
	// SchedulerConfig is the KubeSchedulerConfiguration kube-scheduler runs with beside the
	// extender; empty means the shipped config/scheduler-config.yaml.
	SchedulerConfig string
}

// Usage is a command's help for each shared flag. A flag whose help is empty is not registered:
// the command does not have it.
type Usage struct {
	Dir, Extender, ExtenderArgs, SchedulerConfig string
}

// Register defines on fs the flags of f that u gives a help for: --dir, --extender,
// --extender-args and --scheduler-config, each defaulting to f's value.
func (f *Flags) Register(fs *flag.FlagSet, u Usage) {
	for _, def := range []struct {
		name, usage string
		value       *string
	}{
		{"dir", u.Dir, &f.Dir},
		{"extender", u.Extender, &f.Extender},
		{"extender-args", u.ExtenderArgs, &f.ExtenderArgs},
		{"scheduler-config", u.SchedulerConfig, &f.SchedulerConfig},
	} {
		if def.usage != "" {
			fs.StringVar(def.value, def.name, *def.value, def.usage)
		}
	}
}
