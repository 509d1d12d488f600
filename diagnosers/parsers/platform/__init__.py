"""The line patterns of what lies under the training code: the GPU (CUDA and driver messages), the GPUs' links
(NCCL), the host's kernel (XID events, the OOM killer) and Kubernetes' pod and event states."""
