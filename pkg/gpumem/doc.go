// Package gpumem holds the pure values of gpushare's contract: what a pod asks of GPU memory
// (PodRequest), where it was placed (Allocation) or why it fits nowhere (FitError), and how GPU
// model constraints match card models. It uses no Kubernetes types, so placement code can use it
// without the API machinery; pkg/contract reads these values from pods and writes them as annotations.
package gpumem
