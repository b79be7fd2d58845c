"""Timing: eager, torch.compile and the candidate interleaved, the candidate's run in the worker, who may use the
GPU while another times, this GPU's measured ceilings and the speed of light."""
