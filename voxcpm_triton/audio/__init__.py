"""AudioVAE (latent <-> waveform), the stateless windowed vocoder and prompt-audio preparation."""
