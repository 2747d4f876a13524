"""Helpers the Triton model.py adapters share: input validation, parameter ranges, the wire format
between text_encoder and ar_decoder, the engine's serving loop and the checkpoint setting. Nothing
here imports triton_python_backend_utils, so it is testable without a server."""
