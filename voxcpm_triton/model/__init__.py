"""VoxCPM model modules (LMs, LocEnc, LocDiT, flow matching, FSQ) without the AudioVAE."""
