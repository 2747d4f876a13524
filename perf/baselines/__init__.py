"""Side-by-side baselines: the reference `voxcpm` package and Nano-vLLM-VoxCPM."""
