"""VoxCPM model family (VoxCPM2, VoxCPM1.5, VoxCPM-0.5B): model code, checkpoint loader and engine
that the Triton model folders in model_repository/ import."""
